#!/usr/bin/env bash
# The torch.compile baseline over the CUDA-L1 corpus, resumable across leases (bench --baseline compile: Inductor's
# cache warmed for every task first, then each seed's review times torch.compile(Model) beside it):
#   compile_baseline.sh BUDGET_S NAME [FROM_TAR] -- --level N [bench options]
# e.g. compile_baseline.sh 380 cb1 -- --level 1, then compile_baseline.sh 380 cb1 .devdata/cb1.tar.gz -- --level 1
# (one run folder per level: a resume must ask for the same tasks)
# Only the tasks the corpus has a kernel for are run (--with-kernels: the others have nothing to compare).
# BUDGET_S must leave the lease's limit room for the last pack; the run folder is also packed every minute, and the
# log goes straight to $OUT, so a call cut short still brings back every task finished before it.
source "$(dirname "$0")/setup.sh"
budget=$1 name=$2
shift 2
from=()
if [ -n "${1:-}" ] && [ "$1" != "--" ]; then
    from=(--from "$1")
    shift
fi
[ "${1:-}" = "--" ] && shift
python3 scripts/corpus_bench.py --corpus .devdata/corpus --run ".devrun/$name" --budget "$budget" \
    --tar "$OUT/$name.tar.gz" --parallel 12 --with-kernels "${from[@]}" -- --baseline compile "$@" 2>&1 | tee "$OUT/$name.log"
