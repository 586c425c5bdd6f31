#!/usr/bin/env bash
# Decision-bench captures: capture.sh BUDGET_S NAME "FIXTURES" [capture_decision_bench.py options...]
# FIXTURES: folder names under tests/data/decision/llm (quoted, space-separated; "" for none).
# Writes $OUT/NAME.log and $OUT/NAME.tgz (the capture folder without its extension builds).
source "$(dirname "$0")/setup.sh"
budget=$1 name=$2 fixtures=$3
shift 3
args=()
if [ -n "$fixtures" ]; then
    mkdir -p "/tmp/llm_$name"
    for f in $fixtures; do ln -sfn "$PWD/tests/data/decision/llm/$f" "/tmp/llm_$name/$f"; done
    args=(--llm "/tmp/llm_$name")
fi
python3 scripts/capture_decision_bench.py --out "/tmp/$name" --jobs 16 --timeout-s 200 --budget-s "$budget" \
    "${args[@]}" "$@" 2>&1 | tee "$OUT/$name.log"
tar czf "$OUT/$name.tgz" -C /tmp --exclude=torch_extensions "$name"
