#!/usr/bin/env bash
# The tests that need the GPU machine, in one call: the pytest tests that skip without CUDA or root (a CUDA graph
# over an LSTM's weights, the worker's own /tmp, ncu's), then scripts/gpu_check.py's cheats (each with its guard
# on and off; --only narrows them, e.g. gpu_tests.sh memory_reuse memory_reuse_on_move). Output in $OUT/pytest.log
# and $OUT/cheats.log (the JSON in $OUT/gpu_check).
source "$(dirname "$0")/setup.sh"
python3 -m pytest -q -p no:cacheprovider tests/review/test_public_kernels.py tests/review/test_confine.py \
    tests/review/test_rules.py 2>&1 | tee "$OUT/pytest.log"
only=()
for name in "$@"; do only+=(--only "$name"); done
python3 scripts/gpu_check.py --part cheats "${only[@]}" --out "$OUT/gpu_check" 2>&1 | tee "$OUT/cheats.log"
