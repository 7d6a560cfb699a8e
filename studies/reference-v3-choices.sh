#!/usr/bin/env bash
# The dev-only choices of the v3 reference's two IM-BERT claims (docs/studies/reference.md, "v3: sizing"), bert seed 0:
#  1. low-resource: epochs per training size (100, 300, 1,000 SST-2 sentences), by SST-2 dev accuracy (the
#     whole split; the AdvGLUE replay's dev_accuracy), so that each size is trained to convergence;
#  2. the second task: RTE (its whole 2,490-pair train split) or QNLI (4,370 pairs of its dev split, the rest
#     held out), 2 epochs like the main grid, by dev accuracy well above chance and AdvGLUE's size.
#
#   ROBENCH_DATA_DIR=/path/to/shared/data studies/reference-v3-choices.sh
set -euo pipefail
OUT=${RESULTS:-results/evidence-cpu/reference-v3-choices}
COMMON=(--model bert --attack advglue --seed 0 --lr 1e-4 --batch-size 16 --max-length 128 --results-dir "$OUT"
        --device cpu --quiet --no-estimate)
[ -f "$OUT/records.jsonl" ] && robench unpack "$OUT"  # packed: finished runs are skipped, and packed again below
for spec in "100 5" "100 10" "100 20" "300 3" "300 6" "300 10" "1000 2" "1000 3" "1000 5"; do
  set -- $spec
  robench run --task sst2 --train-size "$1" --epochs "$2" "${COMMON[@]}"
done
robench run --task rte --train-size full --epochs 2 "${COMMON[@]}"
robench run --task qnli --train-size full --epochs 2 "${COMMON[@]}"
robench pack "$OUT"
