#!/usr/bin/env bash
# Reproduce the README's defense, analysis and training-throughput tables in one go.
#
#   bash bench/evidence.sh DATA_DIR OUT_DIR [DEVICE]
#
# Sizes can be overridden for a quick check: TRAIN_SIZE, LOW_RESOURCE, SEEDS, EXAMPLES, EPOCHS.
# Each step has its own time limit (T_DEFENSES, T_ANALYSIS, T_TRAIN seconds) so a partial result
# is still written; every bench resumes from cached checkpoints and records when re-run.
set -uo pipefail
DATA=${1:?usage: evidence.sh DATA_DIR OUT_DIR [DEVICE]}
OUT=${2:?usage: evidence.sh DATA_DIR OUT_DIR [DEVICE]}
DEVICE=${3:-auto}
TRAIN_SIZE=${TRAIN_SIZE:-4000} LOW_RESOURCE=${LOW_RESOURCE:-500} SEEDS=${SEEDS:-0 1 2}
EXAMPLES=${EXAMPLES:-200} EPOCHS=${EPOCHS:-3}
RB=("${PYTHON:-python3}" -m robench.cli)
LOC=(--data-dir "$DATA" --cache-dir "${CACHE_DIR:-$OUT/cache}" --results-dir "$OUT/results" --device "$DEVICE" --quiet)

echo "== defenses: clean SST-2, AdvGLUE-sst2, low-resource, training cost vs bert"
timeout "${T_DEFENSES:-1800}" "${RB[@]}" bench defenses "${LOC[@]}" --train-size "$TRAIN_SIZE" \
  --low-resource "$LOW_RESOURCE" --seeds $SEEDS --epochs "$EPOCHS"

echo "== analysis: diagnostics of arXiv 2108.13602 on the same checkpoints"
timeout "${T_ANALYSIS:-900}" "${RB[@]}" bench analysis "${LOC[@]}" --model bert,freelb,smart,imbert \
  --seed $SEEDS --task sst2 --train-size "$TRAIN_SIZE" --epochs "$EPOCHS" --examples "$EXAMPLES"
"${RB[@]}" leaderboard --results-dir "$OUT/results" --with-analysis

echo "== training throughput: robench vs Hugging Face Trainer"
timeout "${T_TRAIN:-600}" "${RB[@]}" bench train --data-dir "$DATA" --device "$DEVICE" --train-size "$TRAIN_SIZE" \
  --epochs 1
