#!/bin/bash
# Syntax evidence, third model (issue 17): smart, same settings as evidence.sh, after the rebase onto main.
set -e
cd /work/wt17
source .venv/bin/activate
export ROBENCH_DATA_DIR=/work/shared/data HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export ROBENCH_CACHE_DIR=/tmp/wt17cache
OUT=results/evidence-cpu/syntax
/usr/bin/time -f "smart: %U s user, %e s wall" robench analyze --model smart --task sst2 --train-size 400 --epochs 2 \
  --lr 1e-4 --batch-size 16 --seed 0 --examples 50 --shuffles 2 --syntax --blimp-pll-pairs 10 --blimp-prefix-pairs 100 \
  --probe-train-sentences 1000 --probe-test-sentences 1000 --device cpu --results-dir $OUT
robench syntax-report --results-dir $OUT --out $OUT/syntax_report.md
