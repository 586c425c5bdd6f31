#!/usr/bin/env bash
# The timing-spread table (30 tasks x 3 repeats x 2 protocols x quiet/busy), resumable: spread.sh BUDGET_S [OPTIONS]
# (OPTIONS go to timing_spread.py, e.g. --only L2/41,L3/15,L3/30 --protocols robust,ungrouped)
# Reads the committed CUDA-L1 run (docs/h200/kernelbench/results.json) and the kernels of .devdata/corpus; the rows
# done so far travel in .devdata/spread/timing_spread.jsonl (copy the returned file there between calls).
source "$(dirname "$0")/setup.sh"
# The rows are written straight under $OUT, so a call cut short by its time limit still brings back every finished row.
if [ -f .devdata/spread/timing_spread.jsonl ]; then cp .devdata/spread/timing_spread.jsonl "$OUT/"; fi
python3 scripts/timing_spread.py --run docs/h200/kernelbench --kernels .devdata/corpus/kernels \
    --out "$OUT" --budget "$1" "${@:2}" 2>&1 | tee "$OUT/spread.log"
