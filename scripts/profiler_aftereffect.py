"""Does one torch.profiler run slow a process's later launches? The judge's batch (review/judge.py) runs the
candidate in the runner that profiled one of its verify trials, and the reference in one that never profiled.

For each problem and kernel, in a fresh process per TEARDOWN_CUPTI setting: the pace of back-to-back calls (each on
its own input set, each output copied, as the judge's batch makes them) before and after one profiled call. Prints
one line per case.

    PYTHONPATH=src python3 scripts/profiler_aftereffect.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "CUDA-L1 L2/68": ("tests/data/public/cuda_l1/L2_68_problem.py", "tests/data/public/cuda_l1/L2_68_kernel.py"),
    "triton p01": ("tests/data/problems/p01_pointwise_gelu_chain.py",
                   "tests/data/candidates/p01_pointwise_gelu_chain/triton_ok.py"),
}

CHILD = r"""
import importlib.util, sys, time, torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
problem, kernel, calls = load(sys.argv[1], "problem"), load(sys.argv[2], "kernel"), int(sys.argv[3])
torch.manual_seed(0)
ref = problem.Model(*problem.get_init_inputs()).cuda()
torch.manual_seed(0)
cand = kernel.ModelNew(*problem.get_init_inputs()).cuda()
sets = [[x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()] for _ in range(calls)]
def pace(model):
    with torch.no_grad():
        for args in sets[:20]:
            model(*args)
        torch.cuda.synchronize()
        start = time.perf_counter()
        kept = [model(*args).clone() for args in sets]
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6
before = pace(ref), pace(cand)
with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    cand(*sets[0])
    torch.cuda.synchronize()
after = pace(ref), pace(cand)
print(f"before: ref {before[0]:7.1f} cand {before[1]:7.1f} us/call | after one profile: ref {after[0]:7.1f} "
      f"cand {after[1]:7.1f} us/call")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    for name, (problem, kernel) in CASES.items():
        for teardown in (None, "1"):
            env = {k: v for k, v in os.environ.items() if k != "TEARDOWN_CUPTI"}
            if teardown:
                env["TEARDOWN_CUPTI"] = teardown
            done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / problem), str(ROOT / kernel),
                                   str(args.calls)], capture_output=True, text=True, env=env, timeout=300)
            line = done.stdout.strip() or done.stderr.strip()[-400:]
            print(f"{name:14} TEARDOWN_CUPTI={teardown or 'unset':5} {line}", flush=True)


if __name__ == "__main__":
    main()
