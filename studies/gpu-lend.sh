#!/usr/bin/env bash
# The first command of a session lent a GPU (docs/studies/gpu.md): through the device tool, from the repository root,
#   run(command="bash studies/gpu-lend.sh", carry=[".gpu"], timeout_s=600)
# .gpu/ (ignored) is filled here first by `python studies/gpu_prepare.py`: site.tar.xz (packages, unpacked into
# /tmp/site), minilm.tar.xz (the float16 MiniLM copy, ROBENCH_MINILM_DIR), data.tar.xz (the data dir), cut.tar.xz
# (the attack's word resources cut to the SST-2 dev split, ROBENCH_LEXICON_CUT) and pack.json (the steps it serves). Results: results/evidence-gpu/ on the machine, and $OUT/evidence-gpu.tar.gz + $OUT/summary.md
# back here, refreshed after every step. Extra flags go to the script (e.g. --plan). LIMIT: seconds for
# everything, installs included (default 585 of the command's 600).
set -uo pipefail
LIMIT=${LIMIT:-585}
SITE=${SITE:-/tmp/site} UNPACK=${UNPACK:-/tmp/gpu}  # where the wheels are installed and the pack unpacked
[ -f .gpu/pack.json ] || { echo "gpu-lend: error: no .gpu/pack.json: run studies/gpu_prepare.py here first" >&2; exit 1; }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
pip=(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE")
mkdir -p "$SITE"
python3 studies/gpu_prepare.py --gpu .gpu --unpack "$UNPACK" --site "$SITE" || exit 1
"${pip[@]}" --no-build-isolation . || exit 1  # robench from the tree, built with the carried setuptools
export ROBENCH_MINILM_DIR=$UNPACK/minilm ROBENCH_LEXICON_CUT=$UNPACK/cut
steps=$(python3 -c 'import json; print(json.load(open(".gpu/pack.json"))["steps"])')
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
echo "installed and unpacked in ${SECONDS} s; steps this pack serves: ${steps}"
exec python3 studies/gpu_lend.py --data-dir "$UNPACK/data" --cache-dir "$UNPACK/cache" --out results/evidence-gpu \
  --bundle "${OUT:-/tmp/gpu-lend-bundle}" --limit $((LIMIT - SECONDS)) --steps "$steps" "$@"
