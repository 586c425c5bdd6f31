#!/usr/bin/env bash
# The timing CPU (review/pinning.py) off and on, side by side in one call: pin_ab.sh BUDGET_S TASKS [REPEATS]
#  1. the launch probe twice (python -m kernelskill.review.pace): does it rank the CPUs the same way twice?
#  2. timing_spread.py on TASKS (e.g. L3/30,L1/24), graphed protocol, quiet and busy, once with
#     KERNELSKILL_TIMING_CPU=off and once with auto (the default), each half of BUDGET_S; rows in $OUT/off, $OUT/auto
# Carry .whl and .devdata/corpus. Each half prints its table; $OUT/pin_ab.log has both.
source "$(dirname "$0")/setup.sh"
budget=${1:?pin_ab.sh BUDGET_S TASKS [REPEATS]}
tasks=${2:?pin_ab.sh BUDGET_S TASKS [REPEATS]}
repeats=${3:-3}
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/pin_ab.log"
for i in 1 2; do python3 -m kernelskill.review.pace --device cuda | tee -a "$OUT/pin_ab.log"; done
for setting in off auto; do
    echo "== KERNELSKILL_TIMING_CPU=$setting" | tee -a "$OUT/pin_ab.log"
    KERNELSKILL_TIMING_CPU=$setting timeout $((budget / 2 + 30)) python3 scripts/timing_spread.py \
        --run docs/h200/kernelbench --kernels .devdata/corpus/kernels --out "$OUT/$setting" --exclude L3/35 \
        --only "$tasks" --protocols graphed --repeats "$repeats" --budget $((budget / 2)) 2>&1 \
        | tail -25 | tee -a "$OUT/pin_ab.log"
done
