"""Does where a small kernel's buffers lie set its time? One op, one process, many buffers, timed in turn.

Sessions 18-21 (docs/h200/timing): in one review in three of a host-bound level-1 task, one side is 6-10% slower in
every block, though both sides run torch's own op on the same inputs, interleaved in one process. Two copies of the
op timed in one process with the same allocations agree within 1.3% (session 19's event_drift), while the op's level
moves by up to 10% between processes; the two sides' outputs, in a review, land in different blocks of the
allocator's memory. If the level belongs to the physical memory behind a buffer, the same op with its output (or
input) in different allocations of one process should show stable, different levels. This measures it directly:

- `out`: the op writes into one of `--buffers` outputs, each the head of its own allocation (a new cudaMalloc each);
- `in`: the op reads one of `--buffers` inputs, each the head of its own allocation, into one output;
- `alloc`: the op allocates its output through torch's caching allocator (as the Timer's callables do), one
  "buffer" per block of `--buffers` spacer sizes held through the block, so its outputs land elsewhere;
- `graph`: `out`, but each buffer's group of calls captured once as a CUDA graph and replayed.

A sample is the Timer's: the L2 flushed, the device spun while the host enqueues, then `--group` back-to-back calls
between two events (us per call). Blocks of 10 samples per buffer in turn, `--rounds` times. Per process and arm it
prints each buffer's median over all rounds, the spread of those (max/min), and how well the buffers' order holds
from the first half of the rounds to the second (the rank correlation: near 1 when a buffer's level is its own).

    python scripts/device/placement_probe.py --out DIR [--children 6] [--buffers 12] [--rounds 4] [--op tanh]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from event_drift import sm_clock  # (this folder is on the path: the script is run by its file name)

OPS = ("tanh", "hardsigmoid", "gelu")


def child(args: argparse.Namespace) -> dict:
    import torch

    from kernelskill.review.timing import L2_FLUSH_BYTES, spin_gpu

    dev = torch.device("cuda")
    shape, n = (16, 16384), 16 * 16384
    op = {"tanh": torch.tanh, "hardsigmoid": torch._C._nn.hardsigmoid, "gelu": torch._C._nn.gelu}[args.op]
    alloc_op = {"tanh": torch.tanh, "hardsigmoid": torch.nn.functional.hardsigmoid,
                "gelu": torch.nn.functional.gelu}[args.op]
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=dev)

    def own(fill: bool) -> torch.Tensor:
        # 12 MB: above the allocator's 10 MB large-segment cut, so each is a cudaMalloc of its own
        t = torch.empty(3 * 2**20, dtype=torch.float32, device=dev)
        head = t[:n].view(shape)
        if fill:
            head.normal_()
        keep.append(t)
        return head

    keep: list[torch.Tensor] = []
    x = own(True)
    outs = [own(False) for _ in range(args.buffers)]
    ins = [own(True) for _ in range(args.buffers)]
    out0 = own(False)
    sizes = [int(2**20 * k / 2) for k in range(args.buffers)]  # alloc arm: spacers of 0, 0.5, 1, ... MB

    def timed(enqueue, calls: int) -> float:
        flush.zero_()
        spin_gpu(400e-6)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        enqueue()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / calls

    g = args.group
    graphs = []
    if "graph" in args.arms:
        for o in outs:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    op(x, out=o)
            torch.cuda.current_stream().wait_stream(s)
            gr = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gr):
                for _ in range(g):
                    op(x, out=o)
            graphs.append(gr)

    def arm_call(arm: str, b: int):
        if arm == "out":
            return lambda: [op(x, out=outs[b]) for _ in range(g)]
        if arm == "in":
            return lambda: [op(ins[b], out=out0) for _ in range(g)]
        if arm == "graph":
            return graphs[b].replay

        def alloc() -> None:
            out = None
            for _ in range(g):
                out = alloc_op(x)
            del out
        return alloc

    result: dict = {"op": args.op, "arms": {}}
    with torch.no_grad():
        for arm in args.arms:
            per: list[list[float]] = [[] for _ in range(args.buffers)]  # per buffer, per round: median
            for _ in range(args.rounds):
                for b in range(args.buffers):
                    spacer = torch.empty(sizes[b], dtype=torch.uint8, device=dev) if arm == "alloc" else None
                    fn = arm_call(arm, b)
                    fn()
                    torch.cuda.synchronize()
                    per[b].append(statistics.median(timed(fn, g) for _ in range(10)))
                    del spacer
            result["arms"][arm] = per
    result["clock"] = sm_clock()
    return result


def ranks(values: list[float]) -> list[int]:
    order = sorted(range(len(values)), key=values.__getitem__)
    r = [0] * len(values)
    for i, k in enumerate(order):
        r[k] = i
    return r


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    if n < 3:
        return float("nan")
    d2 = sum((x - y) ** 2 for x, y in zip(ra, rb))
    return 1 - 6 * d2 / (n * (n * n - 1))


def summary(per: list[list[float]]) -> dict:
    meds = [statistics.median(r) for r in per]
    half = max(1, len(per[0]) // 2)
    first = [statistics.median(r[:half]) for r in per]
    second = [statistics.median(r[half:] or r) for r in per]
    # within a buffer: how far its rounds stray from its own median (what a single block could show)
    within = max(max(r) / min(r) for r in per)
    return {"medians": [round(m, 3) for m in meds], "spread": round(max(meds) / min(meds), 4),
            "within": round(within, 4), "rank_corr": round(spearman(first, second), 3)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--children", type=int, default=6)
    p.add_argument("--buffers", type=int, default=12)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--group", type=int, default=11)
    p.add_argument("--op", choices=OPS, default="tanh")
    p.add_argument("--arms", default="out,in,alloc,graph")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.arms = args.arms.split(",")
    if args.child:
        print(json.dumps(child(args)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{args.op}: {args.buffers} buffers, {args.rounds} rounds of blocks of 10 samples, group {args.group}")
    print(f"{'proc':>4} {'arm':<6} {'spread':>7} {'within':>7} {'rank r':>7}  medians (us)")
    for c in range(args.children):
        t0 = time.time()
        cmd = [sys.executable, __file__, "--child", "--out", str(args.out), "--buffers", str(args.buffers),
               "--rounds", str(args.rounds), "--group", str(args.group), "--op", args.op, "--arms", ",".join(args.arms)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"process {c} failed:\n{done.stderr[-3000:]}")
            continue
        res = json.loads(done.stdout.strip().splitlines()[-1])
        res["process"] = c
        rows.append(res)
        for arm, per in res["arms"].items():
            s = summary(per)
            print(f"{c:>4} {arm:<6} {s['spread']:>7.3f} {s['within']:>7.3f} {s['rank_corr']:>7.2f}  "
                  + " ".join(f"{m:.2f}" for m in s["medians"]))
        print(f"     clocks {res['clock']} ({time.time() - t0:.0f} s)")
    with open(args.out / "placement_probe.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    for arm in args.arms:
        levels = [statistics.median(statistics.median(r) for r in res["arms"][arm]) for res in rows]
        if levels:
            print(f"{arm}: process levels {min(levels):.3f}-{max(levels):.3f} us "
                  f"({max(levels) / min(levels):.3f}); in-process spreads "
                  + " ".join(f"{summary(res['arms'][arm])['spread']:.3f}" for res in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
