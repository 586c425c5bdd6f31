#!/bin/bash
# One chunk of the CUDA-L1 run on a GPU machine: our bench beside KernelBench's own harness, resumable.
#
#   scripts/kernelbench_chunk.sh OUT CHUNK BUDGET_S [FROM_TAR]
#
# CORPUS (default .devdata/corpus: `kernelskill corpus import h100.json --names-from KernelBench@21fbe5a --out ...`),
# KB_SRC (KernelBench@21fbe5a's src folder, default .devdata/kb21/src), KB_OUT (its verdicts, JSON lines, default
# .devdata/kb.jsonl, skipped where done), PAR (bench --parallel, default 12) and KBJOBS (harness processes, default 3)
# come from the environment. Writes OUT/chunkN.log, OUT/kbN.log, OUT/runN.tar.gz (the run folder, for --from) and
# OUT/kb.jsonl.
set -u
out=$1; chunk=$2; budget=$3; from=${4:+--from $4}
corpus=${CORPUS:-.devdata/corpus}; kb_src=${KB_SRC:-.devdata/kb21/src}; kb_out=${KB_OUT:-.devdata/kb.jsonl}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
( timeout $((budget + 40)) python3 scripts/kernelbench_harness.py --kernelbench "$kb_src" --corpus "$corpus" \
    --out "$kb_out" --phase eval --jobs "${KBJOBS:-3}" --deadline $((budget - 60)) > "$out/kb$chunk.log" 2>&1
  echo "kb harness exit $?" >> "$out/kb$chunk.log" ) &
kb=$!
# shellcheck disable=SC2086
python3 scripts/corpus_bench.py --corpus "$corpus" --run .devrun/cuda-l1 --budget "$budget" \
    --tar "$out/run$chunk.tar.gz" --parallel "${PAR:-12}" $from > "$out/chunk$chunk.log" 2>&1
wait $kb
cp "$kb_out" "$out/kb.jsonl"
tail -8 "$out/chunk$chunk.log"; tail -3 "$out/kb$chunk.log"
