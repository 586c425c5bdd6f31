#!/usr/bin/env bash
# Review some CUDA-L1 corpus tasks again on the landed code: recheck.sh BUDGET_S NAME [bench options after --]
# e.g. recheck.sh 120 recheck7 --level 3 --tasks 39. Needs .devdata/corpus (README.md here says how to make it).
source "$(dirname "$0")/setup.sh"
budget=$1 name=$2
shift 2
mkdir -p "$OUT/re"
python3 scripts/corpus_bench.py --corpus .devdata/corpus --run ".devrun/$name" --budget "$budget" \
    --tar "$OUT/re/$name.tar.gz" --parallel 1 -- "$@" 2>&1 | tee "$OUT/$name.log"
