#!/usr/bin/env bash
# The graph batch's A/B in one call: graph_ab.sh BUDGET_S [TASKS]
#  1. the host-bound spread tasks reviewed with KERNELSKILL_BATCH_GRAPH=on into $OUT/on and =off into $OUT/off, each
#     from no rows (session 15's, in .devdata/spread, are set aside: spread.sh resumes from them), BUDGET_S each
#  2. with it on: the trust cases that exercise a capture (Triton, legacy-stream CUDA, a side stream) and the
#     sampled comparison's attack
# MODES="on" runs only the first part's "on" half. Carry .whl and .devdata. Each review's line says confirmed or not and graph or eager on each side (g/e).
source "$(dirname "$0")/setup.sh"
budget=${1:?graph_ab.sh BUDGET_S [TASKS]}
tasks=${2:-L1/21,L1/19,L1/22,L1/25,L1/28,L1/24,L1/67}
[ -d .devdata/spread ] && mv .devdata/spread /tmp/spread_set_aside
nvidia-smi --query-gpu=name --format=csv,noheader
O=$OUT
for mode in ${MODES:-on off}; do
    echo "== KERNELSKILL_BATCH_GRAPH=$mode"
    KERNELSKILL_BATCH_GRAPH=$mode OUT=$O/$mode bash scripts/device/spread.sh "$budget" --protocols robust \
        --only "$tasks" 2>&1 | grep -v "^prebuild" | tail -$((${#tasks} / 3 + 14))
done
echo "== trust cases, KERNELSKILL_BATCH_GRAPH=on"
KERNELSKILL_BATCH_GRAPH=on timeout 200 python3 scripts/trust_check.py --out "$O/trust" \
    --only "skip in batch,honest triton p01,honest cuda g01 64M,CUDA-L1 L1/17,side stream (cheat),KB non-default" \
    2>&1 | tail -16
