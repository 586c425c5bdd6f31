#!/usr/bin/env bash
# What the sessions owe the GPU, in one call of at most ~570 s: owed.sh BENCH_BUDGET_S NAME [BENCH OPTIONS...]
#  1. trust_check (skip with CHECKS=0): the judge on honest cases, the attacks and KernelBench's adversarial kernels
#  2. the CUDA-L1 corpus on the judged reviewer, a run called NAME with the bench options given (e.g. --level 3, or
#     --level 2 --tasks 34,42,74-100), resumed from .devrun/NAME.tar.gz when there is one, packed to
#     $OUT/NAME.tar.gz (copy it to .devrun/ and call again with the same NAME to go on)
# Carry .whl, .devdata/corpus and .devrun. Then, here: compare_harnesses.py --run EARLIER --run <unpacked NAME> --kb ...
source "$(dirname "$0")/setup.sh"
bench=${1:?owed.sh BENCH_BUDGET_S NAME [BENCH OPTIONS...]}
name=${2:?owed.sh BENCH_BUDGET_S NAME [BENCH OPTIONS...]}
shift 2
K=.devdata/corpus
nvidia-smi --query-gpu=name --format=csv,noheader
if [ "${CHECKS:-1}" != 0 ]; then
    timeout 170 python3 scripts/trust_check.py --out "$OUT/trust" \
        --only "honest cuda g01,CUDA-L1 L2/68,garbage,side stream,compile sab,KB " 2>&1 | tail -24
fi
from=()
[ -f ".devrun/$name.tar.gz" ] && from=(--from ".devrun/$name.tar.gz")
timeout $((bench + 40)) python3 scripts/corpus_bench.py --corpus $K --run "/tmp/$name" "${from[@]}" --budget "$bench" \
    --parallel 12 --with-kernels --tar "$OUT/$name.tar.gz" -- "$@" 2>&1 | tail -9
