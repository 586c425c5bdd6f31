#!/usr/bin/env python
"""Check `profile_candidate` + the decision policy on a real GPU (run on the H200, from the repository root):

    python scripts/gpu_profile_check.py                 # all cases, ~1-2 minutes, always under 3
    python scripts/gpu_profile_check.py --keep /tmp/ks  # keep each case's driver, logs, ncu report and CSV

For each case (a GPU-sized problem from tests/data/problems/gpu/ and its Triton candidate
tests/data/candidates/<stem>/triton_ok.py) it profiles the candidate exactly as
`kernelskill memory explain --problem P --candidate C` does - a plain run under the PyTorch profiler, then ncu
(--set full --clock-control none --profile-from-start off) on one warm forward - and runs the decision policy.
It prints one line per case (hot kernel, its time per launch, bottleneck, case, allowed methods) and then the full
trace of one case. ncu must be on PATH (or pass --ncu); the Python running this needs torch and triton.

Every step has a time limit drawn from the budget (--budget-s, default 170 s; 40 s are kept back for each case still
to come), so the whole check ends in time even when a step hangs. Exit code 0 when every case got ncu metrics.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
try:
    import kernelskill  # noqa: F401
except ImportError:  # a source checkout that is not installed
    sys.path.insert(0, str(REPO / "src"))

from rich.console import Console  # noqa: E402

from kernelskill.memory.policy.collect import profile_candidate  # noqa: E402
from kernelskill.memory import load_knowledge  # noqa: E402
from kernelskill.memory import advise  # noqa: E402
from kernelskill.profiling.run import ProfileSettings  # noqa: E402
from kernelskill.memory.tools.render import render_decision  # noqa: E402

RESERVE_S = 40.0  # kept back for each case still to come: a plain run and one ncu pass on a warm Triton cache
PROBLEMS = REPO / "tests" / "data" / "problems" / "gpu"
CANDIDATES = REPO / "tests" / "data" / "candidates"
# (problem stem, what an expert expects the policy to see)
CASES = [
    ("g01_pointwise_chain_64m", "one fused elementwise kernel over 64 Mi floats: DRAM-bound near the roofline"),
    ("g02_row_softmax_16384x8192", "row softmax, one row per program: DRAM-bound (reads x once, writes once)"),
    ("g03_linear_bias_relu_4096", "2048x4096x4096 GEMM with tl.dot (TF32 tensor cores) and a fused epilogue"),
]  # fmt: skip


def case_files(stem: str) -> tuple[Path, Path]:
    return PROBLEMS / f"{stem}.py", CANDIDATES / stem / "triton_ok.py"


def probe(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
        return (done.stdout.strip().splitlines() or [done.stderr.strip()])[-1]
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ncu", default="ncu", help="Nsight Compute executable (default: ncu on PATH)")
    p.add_argument("--budget-s", type=float, default=170.0, help="time budget for all cases (default 170)")
    p.add_argument("--keep", type=Path, help="keep each case's driver, logs, ncu report and CSV under this folder")
    p.add_argument("--only", nargs="+", choices=[c[0] for c in CASES], help="run only these cases")
    p.add_argument("--trace", choices=[c[0] for c in CASES], help="case whose full trace is printed (default: first)")
    p.add_argument("--list", action="store_true", help="print each case's problem and candidate file and exit")
    args = p.parse_args(argv)
    cases = [c for c in CASES if not args.only or c[0] in args.only]
    if args.list:
        for stem, what in cases:
            problem, candidate = case_files(stem)
            print(f"{problem.relative_to(REPO)} {candidate.relative_to(REPO)}  # {what}")
        return 0

    start = time.monotonic()
    deadline = start + args.budget_s
    ncu = shutil.which(args.ncu) or args.ncu
    print(f"ncu: {probe([ncu, '--version'])}")
    print(f"gpu: {probe(['nvidia-smi', '--query-gpu=name,driver_version', '--format=csv,noheader'])}")
    print(f"python: {sys.executable}\n", flush=True)
    kb = load_knowledge()
    results = []
    for i, (stem, what) in enumerate(cases):
        # what this case may use: the budget left minus RESERVE_S for each case after it (time it leaves unused
        # goes to the later cases)
        avail = deadline - time.monotonic() - RESERVE_S * (len(cases) - i - 1)
        if avail < 25:
            results.append((stem, None, None, f"skipped: {avail:.0f} s of the budget left for it"))
            continue
        problem, candidate = case_files(stem)
        run_timeout = min(60.0, max(15.0, 0.45 * avail))
        settings = ProfileSettings(
            ncu=args.ncu, run_timeout_s=run_timeout, ncu_timeout_s=max(10.0, avail - run_timeout - 2),
            keep_dir=(args.keep / stem) if args.keep else None,
        )  # fmt: skip
        t0 = time.monotonic()
        print(f"[{stem}] {what} ...", flush=True)
        evidence = profile_candidate(problem, candidate, kb, settings)
        decision = advise(kb, evidence)
        results.append((stem, evidence, decision, f"{time.monotonic() - t0:.0f} s"))

    print(f"\n{'case':<28} {'ncu':<13} {'hot kernel':<34} {'us/launch':>10}  {'bottleneck':<21} {'case':<30} allowed")
    for stem, ev, d, note in results:
        if d is None:
            print(f"{stem:<28} {note}")
            continue
        hot = ev.ncu.hottest if ev.ncu is not None else None
        us = f"{hot.time_ns / hot.launches / 1e3:.1f}" if hot else "-"
        name = (hot.name if hot else "-")[:34]
        print(f"{stem:<28} {d.ncu_status:<13} {name:<34} {us:>10}  {d.bottleneck:<21} {d.case or 'no match':<30} "
              f"{', '.join(d.allowed_methods) or '-'}  ({note})")  # fmt: skip
        if d.ncu_note:
            print(f"{'':<28} ncu: {d.ncu_note}")
        if d.profiler_note:
            print(f"{'':<28} profiler: {d.profiler_note}")

    shown = next((r for r in results if r[2] is not None and (args.trace is None or r[0] == args.trace)), None)
    if shown is not None:
        print(f"\n===== full trace: {shown[0]} =====")
        render_decision(shown[2], Console(highlight=False, width=160), kb)
    print(f"\ntotal {time.monotonic() - start:.0f} s")
    return 0 if results and all(d is not None and d.ncu_status == "ok" for _, _, d, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
