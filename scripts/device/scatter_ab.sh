#!/usr/bin/env bash
# The scattered timing protocol's A/B in one call: scatter_ab.sh BUDGET_S [TASKS]
# The host-bound level-1 tasks whose reviews put one side 6-9% off in session 18, and three that held, reviewed with
# the robust and the scattered protocol side by side (timing_spread.py interleaves them task by task), from no rows
# (.devdata/spread, where spread.sh resumes, is set aside). Carry .whl and .devdata.
source "$(dirname "$0")/setup.sh"
budget=${1:?scatter_ab.sh BUDGET_S [TASKS]}
tasks=${2:-L1/28,L1/22,L1/25,L1/21,L1/19,L1/24}
[ -d .devdata/spread ] && mv .devdata/spread /tmp/spread_set_aside
nvidia-smi --query-gpu=name --format=csv,noheader
bash scripts/device/spread.sh "$budget" --protocols robust,scattered --only "$tasks" 2>&1 | grep -v "^prebuild" \
    | tail -$((${#tasks} / 3 * 2 + 16))
