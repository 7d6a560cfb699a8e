#!/usr/bin/env bash
# Adaptive evaluation (studies/adaptive.sh) on the v2 reference leaderboard's setting
# (results/evidence-cpu/reference-v2/grid.toml):
# SST-2, 3,000 training examples x 1 epoch, IM-BERT on layers 0,1,2, the same 100 dev examples, 3 seeds.
# The reference records of bert and imbert (advglue, textfooler, gradient-swap) are copied in and reused; this
# adds gradient-swap with BPDA and the transfer of bert's TextFooler texts, then the worst case and the flags.
#
#   bash studies/adaptive-reference.sh     # after `robench grid results/evidence-cpu/reference-v2/grid.toml`
#
# Committed: results/evidence-cpu/adaptive-reference-3000x1/ (this script, BERT_ATTACK=1); results/evidence-cpu/
# adaptive-reference/ is the same protocol on the reference's earlier 1,000 x 3 schedule (the script at 8b1463b).
#
# Environment: ROBENCH_DATA_DIR and ROBENCH_CACHE_DIR as for the grid; OUT: where the records go.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/evidence-cpu/adaptive-reference-3000x1}
[ -f "$OUT/records.jsonl" ] && robench unpack "$OUT"  # packed: work on loose files, packed again at the end
mkdir -p "$OUT/runs"
robench unpack results/evidence-cpu/reference-v2 --to "$OUT/v2"
for model in bert imbert; do
  cp "$OUT"/v2/sst2-"$model"-*.{json,csv} "$OUT/runs/"
done
rm -r "$OUT/v2"
ROBENCH_RESULTS_DIR="$OUT" TRAIN_SIZE=3000 EPOCHS=1 LR=1e-4 BATCH=16 MAX_LENGTH=128 EVAL_SIZE=100 \
  IMBERT_PARAMS="im_layers=0,1,2" BPDA_MODELS=imbert BERT_ATTACK=${BERT_ATTACK:-0} SEEDS=${SEEDS:-"0 1 2"} bash studies/adaptive.sh
robench pack "$OUT"
