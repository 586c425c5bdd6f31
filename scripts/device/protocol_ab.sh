#!/usr/bin/env bash
# Timing protocols side by side in one call: protocol_ab.sh BUDGET_S PROTOCOLS [TASKS]
# The host-bound level-1 tasks whose reviews put one side 5-10% off (sessions 18-19) and one that held, reviewed
# with each protocol (timing_spread.py interleaves them task by task), from no rows (.devdata/spread, where
# spread.sh resumes, is set aside). E.g. protocol_ab.sh 210 robust,graphed L1/28,L1/26,L1/22,L1/25. Carry .whl and .devdata.
source "$(dirname "$0")/setup.sh"
budget=${1:?protocol_ab.sh BUDGET_S PROTOCOLS [TASKS]}
protocols=${2:?protocol_ab.sh BUDGET_S PROTOCOLS [TASKS]}
tasks=${3:-L1/28,L1/22,L1/25,L1/20,L1/26,L1/19}
[ -d .devdata/spread ] && mv .devdata/spread /tmp/spread_set_aside
nvidia-smi --query-gpu=name --format=csv,noheader
bash scripts/device/spread.sh "$budget" --protocols "$protocols" --only "$tasks" 2>&1 | grep -v "^prebuild" \
    | tail -$((${#tasks} / 3 * 2 + 16))
