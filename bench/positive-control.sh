#!/usr/bin/env bash
# The positive control of issue 27: a2t (adversarial training with the A2T attack) against bert in the reference
# setting (SST-2, 3,000 training sentences, lr 1e-4, batch 16, max length 128; a2t: 1 clean + 1 adversarial
# epoch, bert: the reference's 1 epoch), attacked by TextFooler and BERT-Attack (their defaults: the valid
# lexicon synonyms, the textdefender budget) on the same 100 SST-2 dev sentences (eval seed 0), paired.
# Records go to results/evidence-cpu/positive-control/runs; checkpoints to the usual cache (bert's are the
# reference's, reused by run id). Resumable: finished runs are skipped.
#
#   ROBENCH_DATA_DIR=/path/to/shared/data bench/positive-control.sh "0 1 2 3"
set -euo pipefail
SEEDS=${1:-"0 1 2 3"}
OUT=${RESULTS:-results/evidence-cpu/positive-control}
COMMON=(--task sst2 --train-size 3000 --lr 1e-4 --batch-size 16 --max-length 128 --eval-size 100 --eval-seed 0
        --results-dir "$OUT" --device cpu --quiet)
for seed in $SEEDS; do
  for attack in textfooler bert-attack; do
    robench run --model bert --epochs 1 --attack "$attack" --seed "$seed" "${COMMON[@]}"
    robench run --model a2t --epochs 2 --attack "$attack" --seed "$seed" "${COMMON[@]}"
  done
done
robench compare --baseline bert --results-dir "$OUT" | tee "$OUT/compare.txt"
