#!/usr/bin/env bash
# The checks session 10 left for the GPU, in one call of at most ~570 s: owed.sh [BENCH_BUDGET_S]
#  1. trust_check: the judge on the honest cases, the attacks and KernelBench's own adversarial kernels
#  2. review_stages: CUDA-L1's L2/34 (out of memory beside the idle reference runner: 7afc256) and L2/42 (torch's
#     `load`, now built in a folder named by its sources: 6a70143), each built once then reviewed
#  3. the CUDA-L1 corpus on the judged reviewer, resumed from .devrun/cl1c.tar.gz (26 level-2 and 50 level-3 tasks
#     were left), packed to $OUT/cl1d.tar.gz for the next call (copy it to .devrun/ and pass --from again)
# Carry .whl, .devdata/corpus and .devrun. Then, here: compare_harnesses.py --run <unpacked run> --kb ...
source "$(dirname "$0")/setup.sh"
bench=${1:-250}
K=.devdata/corpus
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 scripts/trust_check.py --out "$OUT/trust" \
    --only "honest cuda g01,CUDA-L1 L2/68,garbage,side stream,compile sab,KB " 2>&1 | tail -24
timeout 130 python3 scripts/review_stages.py --repeat 1 \
    --pair $K/problems/level2/34_ConvTranspose3d_LayerNorm_GELU_Scaling.py $K/kernels/level2/34_ConvTranspose3d_LayerNorm_GELU_Scaling.py \
    --pair $K/problems/level2/42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply.py $K/kernels/level2/42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply.py \
    2>&1 | tail -4
from=.devrun/cl1c.tar.gz
[ -f .devrun/cl1d.tar.gz ] && from=.devrun/cl1d.tar.gz
timeout $((bench + 40)) python3 scripts/corpus_bench.py --corpus $K --run /tmp/cl1 --from "$from" --budget "$bench" \
    --parallel 12 --tar "$OUT/cl1d.tar.gz" 2>&1 | tail -9
