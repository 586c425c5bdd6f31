#!/usr/bin/env bash
# The torch.compile baseline over the CUDA-L1 corpus (bench --baseline compile: Inductor's cache warmed for every task
# first, then each seed's review times torch.compile(Model) beside eager and the kernel), level after level, resumable
# across leases:
#   compile_baseline.sh SECONDS [LEVELS]      e.g. compile_baseline.sh 550 "1 2 3"
# One run folder per level (.devrun/cbN: a resume must ask for the same tasks), continued from .devdata/cbN.tar.gz
# when that is carried (copy the tarballs a call brings back there). A level already finished resumes in seconds and
# the next one starts, until SECONDS have passed; keep SECONDS well under the call's limit_s. Only the tasks the
# corpus has a kernel for are run (--with-kernels: the others have nothing to compare). Each level's run folder is
# packed every minute into $OUT/cbN.tar.gz and the log goes straight to $OUT/cb.log, so a call cut short still
# brings back every task finished before it.
source "$(dirname "$0")/setup.sh"
end=$(( $(date +%s) + $1 ))
for level in ${2:-1 2 3}; do
    left=$(( end - $(date +%s) - 45 ))  # the last interrupt and pack take up to 45 s
    if [ "$left" -lt 60 ]; then
        echo "compile_baseline: ${left}s left, level $level not started" | tee -a "$OUT/cb.log"
        break
    fi
    from=()
    [ -f ".devdata/cb$level.tar.gz" ] && from=(--from ".devdata/cb$level.tar.gz")
    python3 scripts/corpus_bench.py --corpus .devdata/corpus --run ".devrun/cb$level" --budget "$left" \
        --tar "$OUT/cb$level.tar.gz" --parallel 12 --with-kernels "${from[@]}" -- --baseline compile --level "$level" \
        2>&1 | tee -a "$OUT/cb.log"
done
