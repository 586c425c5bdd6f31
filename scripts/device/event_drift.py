"""Why one copy of a 3 us kernel runs 6-9% slower than another for a whole review: where its outputs land?

Session 18's graph batch confirmed every host-bound review's events (docs/h200/timing), but one review in three of
L1/28, L1/22 and L1/25 put one side 6-9% slower for the whole review. Both sides are timed interleaved in the
candidate's runner, and L1/28's candidate falls back to torch's own op (its extension never loads), so the two sides
run the same kernel on the same inputs. Set out sample by sample, each side's level is set at the start of one of
its blocks of 10 samples and holds through it (L1/22 quiet #0: 3.30, 3.38, 3.40, 3.26, 3.28, 3.42 us, the sides in
turn), and the one thing the worker's Timer does there is poison the allocator's free blocks (allocating each at its
size, filling it, freeing it), which can move where the next outputs land. This times two copies of L1/28's
reference (torch.nn.functional.hardsigmoid, 16 x 16384 floats) with the reviewer's own Timer and robust protocol, in
`--children` fresh processes, `--rounds` loops `--gap` seconds apart in each (the later half on newly allocated
inputs), every loop in each arm:

- `poison`: as the worker: the free blocks poisoned before each block;
- `none`: no poisoning;
- `shim`: poisoned, then a block of random size (up to 2 MB) held through the block, so its outputs land elsewhere
  from block to block and each side's median is taken over many placements.

    python scripts/device/event_drift.py --out DIR [--children 8] [--rounds 2] [--gap 1] [--arms poison,none,shim]
        [--profile]

`--profile`: every other process first profiles copy b once by CUPTI and tears it down, as the worker's verify stage
does to the candidate (in 6 of the 12 shifted reviews of sessions 18-19 the side that moved was the candidate's;
in the other 6 the reference's, which is never profiled).

Prints one row a loop (median us of each copy, their ratio, the SM clock before and after by nvidia-smi, each
block's median and where its outputs landed) and, per arm, the copies' ratio over every loop: the spread an
interleaved review of two equal kernels would see.
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


def block_addresses(log: list) -> dict[str, list[list[str]]]:
    """Each timed block's output addresses, per copy, as MiB from the lowest address any call got, then the spin
    before its samples in us (the warm-up's calls, before the first block, left out): where a block's outputs landed
    and how long the device spun before each sample, to set beside its median."""
    low = min((p for who, p, _ in log if who != "|"), default=0)
    out: dict[str, list[list[str]]] = {"a": [], "b": []}
    seen, started = None, False
    for who, what, spin in log:
        if who == "|":
            started, seen = True, None
            continue
        if not started:
            continue
        if seen is None:
            seen = [f"spin {spin * 1e6:.0f}"]
            out[who].append(seen)
        mib = f"{(what - low) / (1 << 20):g}"
        if mib not in seen:
            seen.insert(-1, mib)
    return out


def child(rounds: int, gap: float, arms: list[str], device: str = "cuda", profile: bool = False) -> list[dict]:
    import random

    import torch

    from kernelskill.review.guards import poison_free_cuda_memory
    from kernelskill.review.timing import PREFILL_MAX_S, Timer, protocol_limits

    dev = torch.device(device)
    sets = [[torch.randn(16, 16384, device=dev)] for _ in range(3)]
    op = torch.nn.functional.hardsigmoid
    log: list = []  # ("|", arm) before each block of a copy's samples, (copy, output address) after each call

    def copy(name):
        def fn(x):
            out = op(x)
            log.append((name, out.data_ptr(), timers[-1].last_prefill_s if timers else 0.0))
            return out
        return fn

    fns = {"a": copy("a"), "b": copy("b")}
    if profile and dev.type == "cuda":  # as the worker's verify stage profiles the candidate once (one_trial), CUPTI
        import os  # torn down after; here copy b is the one profiled

        os.environ["TEARDOWN_CUPTI"] = "1"
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            fns["b"](sets[0][0])
            torch.cuda.synchronize()
        log.clear()
    shim: list = []
    timers: list = []

    def before_block(arm: str):
        def hook():
            log.append(("|", arm, 0.0))
            if arm in ("poison", "shim") and dev.type == "cuda":  # the worker's Timer poisons the allocator's free blocks before each block
                poison_free_cuda_memory(dev)
            if arm == "shim":  # and here a block of random size is held through the block: outputs land elsewhere
                shim.clear()
                shim.append(torch.empty(random.randrange(1, 4096) * 512, dtype=torch.uint8, device=dev))
        return hook

    group, _, prefill_max_s = protocol_limits("robust")
    rows, kept = [], []
    for r in range(rounds):
        fresh = r >= rounds // 2  # the later half on newly allocated inputs: buffers placed elsewhere (the old
        if fresh:  # ones are kept, so the allocator cannot hand their blocks back)
            kept.append(sets)
            sets = [[torch.randn(16, 16384, device=dev)] for _ in range(3)]
        for arm in arms[r % len(arms):] + arms[:r % len(arms)]:
            timer = Timer(dev, device_sync=True, prefill=prefill_max_s > 0, poison=before_block(arm),
                          prefill_max_s=prefill_max_s or PREFILL_MAX_S)
            timers.append(timer)
            log.clear()
            before = sm_clock()
            samples, _, _ = timer.run(fns, sets, 25, 100, group=group)
            after = sm_clock()
            shim.clear()
            a, b = (statistics.median(samples[k]) * 1e3 for k in ("a", "b"))
            blocks = {k: [round(statistics.median(v[i:i + 10]) * 1e3, 2) for i in range(0, len(v), 10)]
                      for k, v in samples.items()}  # the Timer alternates the copies in blocks of 10 samples
            blocks_at = block_addresses(log)
            rows.append({"round": r, "arm": arm, "a_us": round(a, 3), "b_us": round(b, 3), "ratio": round(a / b, 4),
                         "blocks": blocks, "addresses": blocks_at,
                         "fresh_inputs": fresh, "group": timer.info.group, "clock_before": before,
                         "clock_after": after})
        time.sleep(gap)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gap", type=float, default=1.0)
    parser.add_argument("--arms", default="poison,none,shim")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: a smoke test here
    parser.add_argument("--profile", action="store_true", help="every other process first profiles copy b once by "
                        "CUPTI (torch.profiler, TEARDOWN_CUPTI=1), as the worker profiles the candidate in verify")
    args = parser.parse_args()
    arms = [a for a in args.arms.split(",") if a]
    if args.child:
        print(json.dumps(child(args.rounds, args.gap, arms, args.device, args.profile)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{'proc':>4} {'round':>5} {'arm':>6} {'a us':>7} {'b us':>7} {'a/b':>6}  clock before | after "
          "(sm MHz, mem MHz, C, W)")
    table = []
    for p in range(args.children):
        done = subprocess.run([sys.executable, __file__, "--out", str(args.out), "--child", "--rounds",
                               str(args.rounds), "--gap", str(args.gap), "--arms", args.arms, "--device", args.device,
                               *(["--profile"] if args.profile and p % 2 else [])],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"child {p} failed ({done.returncode}):\n{done.stderr[-3000:]}")
            continue
        for row in json.loads(done.stdout.strip().splitlines()[-1]):
            row["proc"], row["profiled_b"] = p, bool(args.profile and p % 2)
            table.append(row)
            print(f"{p:>3}{'P' if row['profiled_b'] else ' '} {row['round']:>4}{'*' if row['fresh_inputs'] else ' '} "
                  f"{row['arm']:>6} {row['a_us']:>7.3f} "
                  f"{row['b_us']:>7.3f} {row['ratio']:>6.3f}  {row['clock_before']} | {row['clock_after']}")
            for k in ("a", "b"):
                print(f"{'':>10} {k} blocks {row['blocks'][k]}  at MiB {row['addresses'][k]}")
    with open(args.out / "event_drift.jsonl", "w") as f:
        for row in table:
            f.write(json.dumps(row) + "\n")
    if not table:
        return 1
    for arm in arms:
        for profiled in sorted({r["profiled_b"] for r in table}):
            ratios = [r["ratio"] for r in table if r["arm"] == arm and r["profiled_b"] == profiled]
            far = sum(abs(x - 1) > 0.025 for x in ratios)
            print(f"{arm:>6}{' (b profiled)' if profiled else ''}: a/b over {len(ratios)} loops "
                  f"{min(ratios):.3f}-{max(ratios):.3f}, {far} beyond 2.5%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
