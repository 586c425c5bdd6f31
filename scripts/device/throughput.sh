#!/usr/bin/env bash
# Cold reviews a minute on a corpus, with the GPU's busy fraction, in one call:
#   throughput.sh BENCH_BUDGET_S NAME CORPUS [BENCH OPTIONS...]     e.g. throughput.sh 400 sh3 .devdata/mixed --reviews-per-gpu 3
# The precompiled headers are built first (once per machine, before the bench's clock starts); the candidates' and
# the reference runner's own caches are removed (COLD=0 keeps them), so every candidate builds cold; nvidia-smi
# samples the GPU's utilization every 200 ms while the bench runs. The bench is corpus_bench.py's (--rules
# kernelbench; PARALLEL tasks in flight, default 12), resumed from .devrun/NAME.tar.gz when there is one and packed
# to $OUT/NAME.tar.gz.
source "$(dirname "$0")/setup.sh"
budget=${1:?throughput.sh BENCH_BUDGET_S NAME CORPUS [BENCH OPTIONS...]}
name=${2:?throughput.sh BENCH_BUDGET_S NAME CORPUS [BENCH OPTIONS...]}
corpus=${3:?throughput.sh BENCH_BUDGET_S NAME CORPUS [BENCH OPTIONS...]}
shift 3
nvidia-smi --query-gpu=name --format=csv,noheader
start=$(date +%s)
python3 -c "from kernelskill.review.reviewer import prepare_builds; prepare_builds().join()"
echo "precompiled headers ready in $(( $(date +%s) - start )) s"
if [ "${COLD:-1}" != 0 ]; then
    rm -rf /var/tmp/kernelskill-sandbox-*/candidates /var/tmp/kernelskill-sandbox-*/reference
fi
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/$name-util.csv" &
smi=$!
from=()
[ -f ".devrun/$name.tar.gz" ] && from=(--from ".devrun/$name.tar.gz")
timeout $((budget + 40)) python3 scripts/corpus_bench.py --corpus "$corpus" --run "/tmp/$name" "${from[@]}" \
    --budget "$budget" --parallel "${PARALLEL:-12}" --tar "$OUT/$name.tar.gz" -- "$@" 2>&1 | grep -v "^prebuild " | tail -14
kill "$smi"
python3 - "$OUT/$name-util.csv" <<'EOF'
import sys

util = []
for line in open(sys.argv[1]):
    try:
        util.append(float(line.split(",")[0]))
    except ValueError:
        pass
busy = [i for i, u in enumerate(util) if u > 0]
if busy:
    window = util[busy[0]:busy[-1] + 1]
    print(f"GPU utilization (nvidia-smi, every 200 ms): {len(util)} samples; mean {sum(util) / len(util):.0f}% over "
          f"the bench, {sum(window) / len(window):.0f}% from the first busy sample to the last "
          f"({len(window) * 0.2:.0f} s); samples with a kernel running: {len(busy) / len(util):.0%}")
EOF
