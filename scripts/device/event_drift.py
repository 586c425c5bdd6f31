"""Where does a 3 us kernel's event time move: from process to process, or over seconds in one process?

Session 18's graph batch confirmed every host-bound review's events (docs/h200/timing), but one review in three of
L1/28, L1/22 and L1/25 put one side 6-9% slower for the whole review while the other two agreed within 1%. The judged
reviewer times the reference in its runner before the candidate's runner starts, and the candidate in its own runner
seconds later, so a shift of either kind lands on one side only. This tells the two apart, timing the same op
(torch.nn.functional.hardsigmoid on 16 x 16384 floats, L1/28's reference) with the reviewer's own Timer and the
robust protocol, in `--children` fresh processes one after another, each timing `--rounds` loops `--gap` seconds
apart (the first half on the same inputs, the later half each on newly allocated ones), every loop timing two copies
of the op alternately (their ratio is what an interleaved review would see).

    python scripts/device/event_drift.py --out DIR [--children 8] [--rounds 4] [--gap 2]

Prints one row a loop (median us of each copy, their ratio, the SM clock before and after the loop by nvidia-smi,
then each block's median: a review on the H100 had its candidate alternate 3.40 and 3.55 us block by block)
and a summary: the spread of the loops' medians within each process against that across processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def sm_clock() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unread ({e})"


def child(rounds: int, gap: float) -> list[dict]:
    import torch

    from kernelskill.review.timing import PREFILL_MAX_S, Timer, protocol_limits

    dev = torch.device("cuda")
    sets = [[torch.randn(16, 16384, device=dev)] for _ in range(3)]
    op = torch.nn.functional.hardsigmoid
    fns = {"a": lambda x: op(x), "b": lambda x: op(x)}
    group, _, prefill_max_s = protocol_limits("robust")
    timer = Timer(dev, device_sync=True, prefill=prefill_max_s > 0, prefill_max_s=prefill_max_s or PREFILL_MAX_S)
    rows, kept = [], []
    for r in range(rounds):
        fresh = r >= rounds // 2  # the later half on newly allocated inputs: buffers placed elsewhere (the old
        if fresh:  # ones are kept, so the allocator cannot hand their blocks back)
            kept.append(sets)
            sets = [[torch.randn(16, 16384, device=dev)] for _ in range(3)]
        before = sm_clock()
        samples, _, _ = timer.run(fns, sets, 25, 100, group=group)
        after = sm_clock()
        a, b = (statistics.median(samples[k]) * 1e3 for k in ("a", "b"))
        blocks = {k: [round(statistics.median(v[i:i + 10]) * 1e3, 2) for i in range(0, len(v), 10)]
                  for k, v in samples.items()}  # the Timer alternates the copies in blocks of 10 samples
        rows.append({"round": r, "a_us": round(a, 3), "b_us": round(b, 3), "ratio": round(a / b, 4), "blocks": blocks,
                     "fresh_inputs": fresh, "group": timer.info.group, "clock_before": before, "clock_after": after})
        time.sleep(gap)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--gap", type=float, default=2.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.rounds, args.gap)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{'proc':>4} {'round':>5} {'a us':>7} {'b us':>7} {'a/b':>6}  clock before | after (sm MHz, mem MHz, C, W)")
    table = []
    for p in range(args.children):
        done = subprocess.run([sys.executable, __file__, "--out", str(args.out), "--child", "--rounds",
                               str(args.rounds), "--gap", str(args.gap)], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"child {p} failed ({done.returncode}):\n{done.stderr[-3000:]}")
            continue
        for row in json.loads(done.stdout.strip().splitlines()[-1]):
            row["proc"] = p
            table.append(row)
            print(f"{p:>4} {row['round']:>4}{'*' if row['fresh_inputs'] else ' '} {row['a_us']:>7.3f} {row['b_us']:>7.3f} {row['ratio']:>6.3f}  "
                  f"{row['clock_before']} | {row['clock_after']}")
            print(f"{'':>10} a blocks {row['blocks']['a']}\n{'':>10} b blocks {row['blocks']['b']}")
    with open(args.out / "event_drift.jsonl", "w") as f:
        for row in table:
            f.write(json.dumps(row) + "\n")
    if not table:
        return 1
    procs = sorted({r["proc"] for r in table})
    within = [max(r["a_us"] for r in table if r["proc"] == p) / min(r["a_us"] for r in table if r["proc"] == p)
              for p in procs]
    firsts = [next(r["a_us"] for r in table if r["proc"] == p) for p in procs]
    ratios = [r["ratio"] for r in table]
    print(f"within a process, max/min of its loops' medians: worst {max(within):.3f}, median "
          f"{statistics.median(within):.3f}")
    print(f"across processes, max/min of their first loops' medians: {max(firsts) / min(firsts):.3f}")
    print(f"the two interleaved copies, a/b: {min(ratios):.3f}-{max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
