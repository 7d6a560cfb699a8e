#!/usr/bin/env bash
# Adaptive evaluation of bert and imbert on SST-2 (docs/guide/adaptive.md): black-box attacks, the white-box
# gradient-swap through IM-BERT's unrolled solver and with BPDA, transfer of bert's TextFooler texts, then the
# leaderboard with the worst-case column and the gradient-masking flags.
#
#   bash studies/adaptive.sh                       # the full protocol: 3 seeds, 200 eval examples
#   SEEDS=0 EVAL_SIZE=20 BERT_ATTACK=0 bash studies/adaptive.sh   # the CPU-sized run of docs/studies/adaptive.md
#   bash studies/adaptive-reference.sh             # on the reference leaderboard's checkpoints and records
#
# Environment: ROBENCH_DATA_DIR, ROBENCH_CACHE_DIR, ROBENCH_RESULTS_DIR as for `robench run`.
set -euo pipefail

SEEDS=${SEEDS:-"0 1 2"}
TRAIN_SIZE=${TRAIN_SIZE:-400}
EVAL_SIZE=${EVAL_SIZE:-200}
EPOCHS=${EPOCHS:-2}
LR=${LR:-1e-4}
BATCH=${BATCH:-16}
DEVICE=${DEVICE:-cpu}
BERT_ATTACK=${BERT_ATTACK:-1}   # 0: skip bert-attack (needs `robench resources build-mlm`, slow on CPU)
MAX_LENGTH=${MAX_LENGTH:-128}
IMBERT_PARAMS=${IMBERT_PARAMS:-}  # e.g. "im_layers=0,1,2": IM-BERT's --param values
BPDA_MODELS=${BPDA_MODELS:-"bert imbert"}  # BPDA only changes IM-connections: for bert it is gradient-swap again

common() {
  echo --task sst2 --train-size "$TRAIN_SIZE" --eval-size "$EVAL_SIZE" --epochs "$EPOCHS" --lr "$LR" \
       --batch-size "$BATCH" --max-length "$MAX_LENGTH" --device "$DEVICE" --seed "$1"
}

params() {  # the model's --param flags
  [ "$1" = imbert ] && [ -n "$IMBERT_PARAMS" ] && echo --param "$IMBERT_PARAMS"
  true
}

run_id() {  # the run id of `robench run --model $1 --attack $2 --seed $3` with the settings above
  robench run --model "$1" $(params "$1") --attack "$2" $(common "$3") --dry-run 2>/dev/null \
    | sed -n 's/^  "run_id": "\(.*\)",$/\1/p'
}

attacks=(textfooler gradient-swap)
[ "$BERT_ATTACK" = 1 ] && attacks+=(bert-attack)
for seed in $SEEDS; do
  for model in bert imbert; do
    for attack in "${attacks[@]}"; do
      robench run --model "$model" $(params "$model") --attack "$attack" $(common "$seed")
    done
  done
  for model in $BPDA_MODELS; do
    robench run --model "$model" $(params "$model") --attack gradient-swap --attack-param gradient=bpda \
      $(common "$seed")
  done
  source_run=$(run_id bert textfooler "$seed")
  for model in bert imbert; do
    robench run --model "$model" $(params "$model") --attack "transfer:$source_run" $(common "$seed")
  done
done
robench leaderboard   # leaderboard.{csv,md} (per checkpoint) and settings.{csv,md} with worst_case_accuracy and masking_flags; worstcase.{json,md}
