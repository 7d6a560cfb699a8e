#!/usr/bin/env bash
# Reproduce the README's defense, IM-BERT search, analysis, attack-engine and training-throughput tables in one go.
#
#   bash studies/evidence.sh DATA_DIR OUT_DIR [DEVICE]
#
# Sizes default to the GPU evidence; the README's CPU tables used
#   TRAIN_SIZE=400 LOW_RESOURCE=100 EPOCHS=2 LR=1e-4 BATCH=16 (and no time limits: T_*=0).
# Each step has its own time limit (T_DEFENSES, T_SEARCH, T_ANALYSIS, T_ATTACK, T_TRAIN seconds; 0 = none) so a
# partial result is still written; every bench resumes from cached checkpoints and records when re-run.
set -uo pipefail
DATA=${1:?usage: evidence.sh DATA_DIR OUT_DIR [DEVICE]}
OUT=${2:?usage: evidence.sh DATA_DIR OUT_DIR [DEVICE]}
DEVICE=${3:-auto}
TRAIN_SIZE=${TRAIN_SIZE:-4000} LOW_RESOURCE=${LOW_RESOURCE:-500} SEEDS=${SEEDS:-0 1 2}
EXAMPLES=${EXAMPLES:-200} EPOCHS=${EPOCHS:-3} LR=${LR:-5e-5} BATCH=${BATCH:-32}
RB=("${PYTHON:-python3}" -m robench.cli)
LOC=(--data-dir "$DATA" --cache-dir "${CACHE_DIR:-$OUT/cache}" --device "$DEVICE" --quiet)
TRAIN=(--train-size "$TRAIN_SIZE" --epochs "$EPOCHS" --lr "$LR" --batch-size "$BATCH")

echo "== defenses: clean SST-2, AdvGLUE-sst2, low-resource (same number of steps), training cost vs bert"
timeout "${T_DEFENSES:-1800}" "${RB[@]}" bench defenses "${LOC[@]}" --results-dir "$OUT/results" "${TRAIN[@]}" \
  --low-resource "$LOW_RESOURCE" --seeds $SEEDS

echo "== IM-BERT search on SST-2 dev only (seeds $SEEDS), one factor at a time around T=5, gamma=0.01, all layers"
for grid in "layers:--grid-layers all 0,1,2 3,4,5 --grid-steps 5 --grid-gamma 0.01" \
            "steps:--grid-layers all --grid-steps 3 5 --grid-gamma 0.01" \
            "gamma:--grid-layers all --grid-steps 5 --grid-gamma 0.005 0.01 0.02"; do
  timeout "${T_SEARCH:-600}" "${RB[@]}" bench defenses --search "${LOC[@]}" --results-dir "$OUT/search-${grid%%:*}" \
    "${TRAIN[@]}" --seeds $SEEDS ${grid#*:}
done

echo "== analysis: diagnostics of arXiv 2108.13602 on the defenses' checkpoints"
timeout "${T_ANALYSIS:-900}" "${RB[@]}" bench analysis "${LOC[@]}" --results-dir "$OUT/results" \
  --model bert,freelb,smart,imbert --seed $SEEDS --task sst2 "${TRAIN[@]}" --examples "$EXAMPLES"
"${RB[@]}" leaderboard --results-dir "$OUT/results" --with-analysis

echo "== attack engine: TextFooler vs TextAttack's, the fraction of the raw forward rate and the profile (docs/studies/attacks.md)"
timeout "${T_ATTACK:-900}" "${RB[@]}" bench attack "${LOC[@]}" --results-dir "$OUT/results" --examples "$EXAMPLES" \
  --no-stock

echo "== training throughput: robench vs Hugging Face Trainer"
timeout "${T_TRAIN:-600}" "${RB[@]}" bench train --data-dir "$DATA" --device "$DEVICE" --train-size "$TRAIN_SIZE" \
  --epochs 1
