#!/usr/bin/env bash
# The torch.compile baseline over the CUDA-L1 corpus (bench --baseline compile: Inductor's cache warmed for every task
# first, then each seed's review times torch.compile(Model) beside eager and the kernel), level after level, resumable
# across leases:
#   compile_baseline.sh SECONDS [LEVELS]      e.g. compile_baseline.sh 550 "1 2 3"
# A level may be narrowed to a range of task numbers, LEVEL:FIRST-LAST (e.g. "2:38-100 3"), to finish a level whose
# run folder was lost; the range gets a run folder of its own (.devrun/cb2-38-100) and its own tarball and summary.
# One run folder per level (.devrun/cbN: a resume must ask for the same tasks), continued from .devdata/cbN.tar.gz
# when that is carried (copy the tarballs a call brings back there). A level already finished resumes in seconds and
# the next one starts, until SECONDS have passed; keep SECONDS well under the call's limit_s. Only the tasks the
# corpus has a kernel for are run (--with-kernels: the others have nothing to compare). Each level's run folder is
# packed every minute into $OUT/cbN.tar.gz and the log goes straight to $OUT/cb.log, so a call cut short still
# brings back every task finished before it. WARM_JOBS=N sets bench's --warm-jobs (default half the cores, at most 8):
# more when the warm-ups compile in their own process, one core each (level 3 on the H200, see
# docs/h200/kernelbench/compile).
source "$(dirname "$0")/setup.sh"
end=$(( $(date +%s) + $1 ))
for item in ${2:-1 2 3}; do
    level=${item%%:*}
    name="cb${item/:/-}"
    only=()
    if [ "$item" != "$level" ]; then
        range=${item#*:}
        if ! [[ "$range" =~ ^[0-9]+-[0-9]+$ ]]; then
            echo "compile_baseline: '$item' is not LEVEL or LEVEL:FIRST-LAST (e.g. 2:38-100)" | tee -a "$OUT/cb.log"
            exit 2
        fi
        only=(--tasks "$(seq -s, "${range%-*}" "${range#*-}")")
    fi
    left=$(( end - $(date +%s) - 45 ))  # the last interrupt and pack take up to 45 s
    if [ "$left" -lt 60 ]; then
        echo "compile_baseline: ${left}s left, $name not started" | tee -a "$OUT/cb.log"
        break
    fi
    from=()
    [ -f ".devdata/$name.tar.gz" ] && from=(--from ".devdata/$name.tar.gz")
    python3 scripts/corpus_bench.py --corpus .devdata/corpus --run ".devrun/$name" --budget "$left" \
        --tar "$OUT/$name.tar.gz" --parallel 12 --with-kernels "${from[@]}" -- --baseline compile --level "$level" \
        "${only[@]}" ${WARM_JOBS:+--warm-jobs "$WARM_JOBS"} 2>&1 | tee -a "$OUT/cb.log"
done
