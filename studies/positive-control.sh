#!/usr/bin/env bash
# The positive control of issue 27 (docs/studies/defenses.md, "The positive control"): adversarial training against bert
# in the reference setting (SST-2, 3,000 training sentences, lr 1e-4, batch 16, max length 128), every model
# trained for 2 epochs so that `robench compare` pairs them (a2t: 1 clean + 1 adversarial epoch; bert: 2 clean):
#
#   bert      plain fine-tuning (the baseline);
#   a2t-tf    a2t whose training attack is TextFooler's search at TextDefender's budget (the evaluation attack's
#             own: k 50, no cosine floor, 30% of the words) - adversarial training against the very attack;
#   a2t       the paper's A2T (k 20, cosine 0.8, 10% of the words, sentence cosine 0.9), with --paper.
#
# Each is attacked by TextFooler and BERT-Attack (their defaults: the valid lexicon synonyms, the textdefender
# budget) on the same 100 SST-2 dev sentences (eval seed 0), paired. Records go to
# results/evidence-cpu/positive-control (packed: unpacked while the script runs, packed again at the end);
# checkpoints to the usual cache. Resumable: finished runs are skipped.
#
#   ROBENCH_DATA_DIR=/path/to/shared/data studies/positive-control.sh "0 1 2 3" [--paper]
set -euo pipefail
SEEDS=${1:-"0 1 2 3"}
PAPER=${2:-}
OUT=${RESULTS:-results/evidence-cpu/positive-control}
COMMON=(--task sst2 --train-size 3000 --epochs 2 --lr 1e-4 --batch-size 16 --max-length 128 --eval-size 100
        --eval-seed 0 --results-dir "$OUT" --device cpu --quiet)
[ -f "$OUT/records.jsonl" ] && robench unpack "$OUT"
A2T_TF=(--param a2t_attack=textfooler --param a2t_k=50 --param a2t_min_cos=-1 --param a2t_max_rate=0.3
        --param a2t_min_words=0 --param a2t_query_budget=1000)
for seed in $SEEDS; do
  for attack in textfooler bert-attack; do
    robench run --model bert --attack "$attack" --seed "$seed" "${COMMON[@]}"
    robench run --model a2t "${A2T_TF[@]}" --attack "$attack" --seed "$seed" "${COMMON[@]}"
    if [ "$PAPER" = "--paper" ]; then
      robench run --model a2t --attack "$attack" --seed "$seed" "${COMMON[@]}"
    fi
  done
done
robench pack "$OUT"
robench compare --baseline bert --results-dir "$OUT" | tee "$OUT/compare.txt"
