#!/usr/bin/env bash
# Adaptive evaluation of bert and imbert on SST-2 (docs/adaptive.md): black-box attacks, the white-box
# gradient-swap through IM-BERT's unrolled solver and with BPDA, transfer of bert's TextFooler texts, then the
# leaderboard with the worst-case column and the gradient-masking flags.
#
#   bash bench/adaptive.sh                       # the full protocol: 3 seeds, 200 eval examples
#   SEEDS=0 EVAL_SIZE=20 BERT_ATTACK=0 bash bench/adaptive.sh   # the CPU-sized run of docs/adaptive.md
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

common() {
  echo --task sst2 --train-size "$TRAIN_SIZE" --eval-size "$EVAL_SIZE" --epochs "$EPOCHS" --lr "$LR" \
       --batch-size "$BATCH" --device "$DEVICE" --seed "$1"
}

run_id() {  # the run id of `robench run --model $1 --attack $2 --seed $3` with the settings above
  python - "$@" <<EOF
import sys
from robench.spec import RunSpec, TrainConfig
model, attack, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(RunSpec(task="sst2", model=model, attack=attack, seed=seed, train_size=$TRAIN_SIZE, eval_size=$EVAL_SIZE,
              train=TrainConfig(epochs=$EPOCHS, lr=$LR, batch_size=$BATCH)).run_id)
EOF
}

attacks=(textfooler gradient-swap)
[ "$BERT_ATTACK" = 1 ] && attacks+=(bert-attack)
for seed in $SEEDS; do
  for model in bert imbert; do
    for attack in "${attacks[@]}"; do
      robench run --model "$model" --attack "$attack" $(common "$seed")
    done
    robench run --model "$model" --attack gradient-swap --attack-param gradient=bpda $(common "$seed")
  done
  source_run=$(run_id bert textfooler "$seed")
  for model in bert imbert; do
    robench run --model "$model" --attack "transfer:$source_run" $(common "$seed")
  done
done
robench leaderboard   # leaderboard.{csv,md} with worst_case_accuracy and masking_flags; worstcase.{json,md}
