"""Why are 5-60 us kernels noisy under the Timer? One tiny kernel, timed four ways in one process (issue: honest
figures). A diagnostic for the next timing change, not part of a review.

    PYTHONPATH=src python scripts/timing_diag.py [--numel 262144] [--samples 200]

Ways: (a) the Timer as a review uses it (input copy + L2 flush, then events around the call); (b) the same, with
the GPU kept busy by a spin kernel (torch.cuda._sleep) before the start event, so the host's launch latency is
hidden; (c) host time to enqueue one call (no sync), the floor a host-bound call cannot beat; (d) (b) in groups of
16 calls. Printed per way: median us, relative MAD, mean/median - 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def stats(xs: list[float]) -> str:
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs) / med
    return f"median {med * 1e3:8.2f} us  rel MAD {mad * 100:5.1f}%  mean/median-1 {statistics.mean(xs) / med - 1:+6.1%}"


def main() -> int:
    import torch

    from kernelskill.review.timing import Timer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numel", type=int, default=16 * 16384)
    ap.add_argument("--samples", type=int, default=200)
    args = ap.parse_args()
    dev = torch.device("cuda")
    sets = [[torch.randn(args.numel, device=dev)] for _ in range(3)]
    fns = {"sigmoid": torch.sigmoid, "gelu": torch.nn.functional.gelu}
    timer = Timer(dev)
    for group in (1, 16):
        samples, _, _ = timer.run(fns, sets, warmup=25, iters=args.samples, group=group)
        for name, xs in samples.items():
            print(f"(a) Timer, group {group:2d}, {name:8s} {stats(xs)}")
    flush = timer.flush_buffer
    for group in (1, 16):
        for name, fn in fns.items():
            xs, host = [], []
            for i in range(args.samples + 10):
                a = sets[i % 3]
                flush.zero_()
                torch.cuda._sleep(400_000)  # ~200 us at ~2 GHz: the launches below queue behind it
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                t0 = time.perf_counter()
                for _ in range(group):
                    fn(*a)
                t1 = time.perf_counter()
                e.record()
                e.synchronize()
                if i >= 10:
                    xs.append(s.elapsed_time(e) / group)
                    host.append((t1 - t0) * 1e3 / group)
            print(f"({'b' if group == 1 else 'd'}) sleep first, group {group:2d}, {name:8s} {stats(xs)}")
            print(f"(c) host enqueue,   group {group:2d}, {name:8s} {stats(host)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
