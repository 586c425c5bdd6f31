"""Why does the same Python loop of kernel launches run at 10 us a call in one runner and 20 us in the next?

Session 15's spread run (docs/h200/timing, session 15) put honest host-bound kernels (a few us of GPU work a call)
at 0.43x to 2.38x across three reviews, quiet and busy alike: the judge puts an unconfirmed candidate at the ratio
of both sides' paces in its batch, and each side's pace, set by its launches, moved by up to 2x from process to
process (the runners' own host times too: the reference's 11.0 us in one review, 20.0 us in the next, same code,
no load). This measures that pace in fresh processes, unpinned and pinned to each CPU in turn, with the CPU's
NUMA node, its clock and the GPU's local CPUs beside it, to tell placement from everything else.

    python scripts/device/launch_pace.py --out DIR [--repeats 6] [--cpus all|0,8,15] [--numel 262144]

Each child times, three times over, 2000 back-to-back calls of the judge's batch loop on one small elementwise
op (torch.sigmoid on `numel` floats, each output copied into its row of one block, as worker/judged.calls keeps
outputs), by the host clock with a synchronize at the end, and the GPU time of one call by events. Prints one row
a child and writes them to DIR/launch_pace.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CALLS = 2000


def cpu_now() -> int:
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def node_of(cpu: int) -> int | None:
    for entry in Path(f"/sys/devices/system/cpu/cpu{cpu}").glob("node*"):
        return int(entry.name[4:])
    return None


def child(numel: int) -> dict:
    import torch

    dev = torch.device("cuda")
    x = torch.randn(numel, device=dev)
    block = torch.empty((CALLS, numel), device=dev)
    first = cpu_now()
    with torch.no_grad():
        for i in range(200):  # warm: the op's first launches, the allocator's blocks
            block[i % CALLS].copy_(torch.sigmoid(x))
        torch.cuda.synchronize()
        paces = []
        for _ in range(3):
            began = time.perf_counter()
            for i in range(CALLS):
                block[i].copy_(torch.sigmoid(x))
            torch.cuda.synchronize()
            paces.append((time.perf_counter() - began) / CALLS * 1e6)
        bare = time.perf_counter()
        for _ in range(CALLS):
            torch.sigmoid(x)
        torch.cuda.synchronize()
        bare_us = (time.perf_counter() - bare) / CALLS * 1e6
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        gpu = []
        for _ in range(20):
            a.record()
            torch.sigmoid(x)
            b.record()
            b.synchronize()
            gpu.append(a.elapsed_time(b) * 1e3)
    last = cpu_now()
    return {"cpu_first": first, "cpu_last": last, "node": node_of(last),
            "khz": read(f"/sys/devices/system/cpu/cpu{last}/cpufreq/scaling_cur_freq"),
            "loop_us": [round(p, 3) for p in paces], "bare_us": round(bare_us, 3),
            "gpu_us": round(statistics.median(gpu), 3)}


def gpu_local_cpus() -> tuple[str | None, str | None]:
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.split()[0].lower()
    except (OSError, IndexError, subprocess.SubprocessError):
        return None, None
    dev = Path("/sys/bus/pci/devices") / bus[-12:]  # nvidia-smi's 8-digit domain, sysfs's 4
    return read(str(dev / "local_cpulist")), read(str(dev / "numa_node"))


def run_child(numel: int, cpu: int | None) -> dict:
    pre = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    done = subprocess.run([sys.executable, __file__, "--child", "--numel", str(numel)], capture_output=True, text=True,
                          preexec_fn=pre, timeout=300)
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout)[-400:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--repeats", type=int, default=6, help="unpinned children")
    p.add_argument("--cpus", default="all", help="CPUs to pin a child to, one each: all, or a list like 0,8,15")
    p.add_argument("--numel", type=int, default=16 * 16384, help="floats a call (L1/21's input: 16 x 16384)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.numel)))
        return
    if args.out is None:
        p.error("--out DIR is needed")
    args.out.mkdir(parents=True, exist_ok=True)
    local, node = gpu_local_cpus()
    allowed = sorted(os.sched_getaffinity(0))
    model = next((line.split(":", 1)[1].strip() for line in (read("/proc/cpuinfo") or "").splitlines()
                  if line.startswith("model name")), "?")
    print(f"GPU local CPUs {local}, its NUMA node {node}; this process may run on {len(allowed)} CPUs ({model})")
    cpus = allowed if args.cpus == "all" else [int(c) for c in args.cpus.split(",")]
    plan = [("unpinned", None)] * args.repeats + [(f"cpu {c}", c) for c in cpus]
    print(f"{'child':>10s} {'cpu':>7s} {'node':>4s} {'MHz':>6s} {'loop us (3 runs)':>24s} {'bare us':>8s} {'gpu us':>7s}")
    with open(args.out / "launch_pace.jsonl", "w") as f:
        for label, cpu in plan:
            row = {"child": label, "pinned": cpu, **run_child(args.numel, cpu)}
            f.write(json.dumps(row) + "\n")
            if "error" in row:
                print(f"{label:>10s} failed: {row['error']}")
                continue
            mhz = f"{int(row['khz']) // 1000}" if row.get("khz") else "-"
            loops = " ".join(f"{x:7.2f}" for x in row["loop_us"])
            print(f"{label:>10s} {row['cpu_first']:>3d}>{row['cpu_last']:<3d} {str(row['node']):>4s} {mhz:>6s} "
                  f"{loops:>24s} {row['bare_us']:8.2f} {row['gpu_us']:7.2f}", flush=True)


if __name__ == "__main__":
    main()
