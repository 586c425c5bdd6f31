#!/usr/bin/env bash
# The timing-spread table (30 tasks x 3 repeats x 2 protocols x quiet/busy), resumable: spread.sh BUDGET_S [OPTIONS]
# (OPTIONS go to timing_spread.py, e.g. --only L2/41,L3/15,L3/30 with another --out folder's rows)
# Reads the committed CUDA-L1 run (docs/h200/kernelbench/results.json) and the kernels of .devdata/corpus; the rows
# done so far travel in .devdata/spread/timing_spread.jsonl (copy the returned file there between calls), and the
# finished CUDA builds in .devdata/spread/builds.tgz (returned too, when under 15 MB: the next call builds nothing).
source "$(dirname "$0")/setup.sh"
mkdir -p .devdata/spread
# the build cache of sandboxed workers (root drops them to nobody: review/confine.py, sandbox_cache_root)
cache=${KERNELSKILL_SANDBOX_CACHE:-/var/tmp/kernelskill-sandbox-65534}/kernelskill
if [ -f .devdata/spread/builds.tgz ]; then
    mkdir -p "$cache" && tar xzpf .devdata/spread/builds.tgz --numeric-owner -C "$cache" && echo "builds restored: $(ls "$cache/cuda-build" | wc -l) entries"
fi
python3 scripts/timing_spread.py --run docs/h200/kernelbench --kernels .devdata/corpus/kernels \
    --out .devdata/spread --budget "$1" "${@:2}" 2>&1 | tee "$OUT/spread.log"
cp .devdata/spread/timing_spread.jsonl "$OUT/"
# finished extensions only: objects and the precompiled header (700 MB) are rebuilt when needed
(cd "$cache" && tar czf /tmp/builds.tgz --numeric-owner --exclude='cuda-build/pch' --exclude='cuda-build/obj' \
    --exclude='cuda-build/locks' --exclude='cuda-build/.tmp-*' cuda-build) \
    && [ "$(stat -c %s /tmp/builds.tgz)" -lt 15000000 ] && cp /tmp/builds.tgz "$OUT/" \
    || echo "builds not returned ($(du -h /tmp/builds.tgz 2>/dev/null | cut -f1))"
