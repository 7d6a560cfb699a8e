#!/usr/bin/env bash
# The first command of a session lent a GPU (docs/gpu.md): through the device tool, from the repository root,
#   run(command="bash studies/gpu-lend.sh", carry=[".gpu"], timeout_s=600)
# .gpu/ (ignored) holds what the machine lacks: wheels/ (installed into /tmp/site), data/ (the data dir) and
# cache/ (built resources such as the synonym table). Results: results/evidence-gpu/ on the machine, and
# $OUT/evidence-gpu.tar.gz + $OUT/summary.md back here, refreshed after every step. Extra flags go to the script
# (e.g. --plan). LIMIT: seconds for everything, installs included (default 585 of the command's 600).
set -uo pipefail
LIMIT=${LIMIT:-585}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
pip=(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site)
if compgen -G ".gpu/wheels/*.whl" >/dev/null; then "${pip[@]}" .gpu/wheels/*.whl || exit 1; fi
"${pip[@]}" --no-build-isolation . || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
echo "installed in ${SECONDS} s"
exec python3 studies/gpu_lend.py --data-dir .gpu/data --cache-dir .gpu/cache --out results/evidence-gpu \
  --bundle "${OUT:-/tmp/gpu-lend-bundle}" --limit $((LIMIT - SECONDS)) "$@"
