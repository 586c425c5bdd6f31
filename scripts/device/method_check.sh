#!/usr/bin/env bash
# Before/after of the first-ranked methods: method_check.sh BUDGET_S [method_check.py options, e.g. --only CASE...]
source "$(dirname "$0")/setup.sh"
budget=$1
shift
python3 scripts/method_check.py --out /tmp/mc --budget "$budget" --jobs 16 "$@" 2>&1 | tee "$OUT/mc.log"
cp /tmp/mc/method_check.md /tmp/mc/method_check.json "$OUT/" 2>/dev/null
