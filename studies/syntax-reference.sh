#!/usr/bin/env bash
# The syntax evidence of issue 17 on the v2 reference's checkpoints (results/evidence-cpu/reference-v2/grid.toml:
# SST-2, 3,000 training examples x 1 epoch, lr 1e-4, batch 16, max length 128; bert, freelb, smart and
# imbert on layers 0,1,2; seeds 0-2): `robench analyze --syntax` on each of the 12 checkpoints (reused from
# the cache when the grid trained them, else trained here), then `robench syntax-report`.
#
#   robench resources build-mlm-head && bash studies/syntax-reference.sh
#
# The committed records (results/evidence-cpu/syntax-reference/) were made on the reference's earlier
# schedule: TRAIN_SIZE=1000 EPOCHS=3 bash studies/syntax-reference.sh
#
# Environment: ROBENCH_DATA_DIR and ROBENCH_CACHE_DIR as for the grid; OUT: where the records go;
# TRAIN_SIZE / EPOCHS: the training schedule (default: the reference grid's);
# PLL_PAIRS / PREFIX_PAIRS: BLiMP pairs per set (pseudo-log-likelihood sets / one-prefix sets); PROBE_SENTENCES:
# EWT dev sentences the probe trains on and EWT test sentences it is scored on (first N of each).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/evidence-cpu/syntax-reference}
for model in bert freelb smart imbert; do
  params=()
  [ "$model" = imbert ] && params=(--param im_layers=0,1,2)
  robench analyze --model "$model" "${params[@]}" --task sst2 --train-size "${TRAIN_SIZE:-3000}" --epochs "${EPOCHS:-1}" --lr 1e-4 \
    --batch-size 16 --max-length 128 --seed ${SEEDS:-0 1 2} --syntax --blimp-pll-pairs "${PLL_PAIRS:-20}" \
    --blimp-prefix-pairs "${PREFIX_PAIRS:-1000}" --probe-train-sentences "${PROBE_SENTENCES:-1000}" \
    --probe-test-sentences "${PROBE_SENTENCES:-1000}" --examples 50 --shuffles 2 --results-dir "$OUT" --device "${DEVICE:-cpu}" --quiet
done
robench syntax-report --results-dir "$OUT" --task sst2 --baseline bert --out "$OUT/syntax_report.md"
