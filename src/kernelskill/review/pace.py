"""The launch pace of each CPU, for the judge's choice of the CPU that times both runners (review/pinning.py).

`python -m kernelskill.review.pace --device cuda --cpus 0,1,2` moves every thread of this process to each CPU in
turn and times back-to-back launches of a small op there (the best of three loops), then prints one JSON line:
{cpu: microseconds a launch}. It runs the project's code only, never a problem's or a candidate's.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from kernelskill.review.processes import threads

LAUNCHES = 400
LOOPS = 3
WARMUP = 100


def _move(cpu: int) -> None:
    for tid in threads(os.getpid()):
        try:
            os.sched_setaffinity(tid, {cpu})
        except ProcessLookupError:
            pass


def paces(device: str, cpus: list[int], launches: int = LAUNCHES) -> dict[int, float]:
    import torch

    x = torch.rand(1024, device=device)
    out = torch.empty_like(x)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    found: dict[int, float] = {}
    for cpu in cpus:
        _move(cpu)
        for _ in range(WARMUP):
            torch.sigmoid(x, out=out)
        sync()
        best = float("inf")
        for _ in range(LOOPS):
            began = time.perf_counter()
            for _ in range(launches):
                torch.sigmoid(x, out=out)
            sync()
            best = min(best, (time.perf_counter() - began) / launches)
        found[cpu] = round(best * 1e6, 3)
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cpus", default="", help="comma-separated CPU numbers (default: every CPU this may use)")
    parser.add_argument("--launches", type=int, default=LAUNCHES)
    args = parser.parse_args(argv)
    cpus = [int(c) for c in args.cpus.split(",") if c.strip()] or sorted(os.sched_getaffinity(0))
    print(json.dumps(paces(args.device, cpus, args.launches)), flush=True)


if __name__ == "__main__":
    main()
