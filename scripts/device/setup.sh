# sourced by the other scripts here, on the GPU machine: pydantic and its needs from the wheels in .whl/ (the GPU
# image lacks them), kernelskill from src/, unbuffered output
set -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "setup: no wheels in .whl/ (see scripts/device/README.md)"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
