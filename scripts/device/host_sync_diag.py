"""Why does a forward that waits on the device (L3/30 SwinTransformerV2: a pageable copy in every attention layer)
take 14 ms in one stretch of samples and 24 ms in the next? One review-like timing per child process, the reference
and the candidate alternating in blocks, under each CUDA host-synchronization mode (set before the context exists),
quiet and with all but two cores busy; the SM clock is logged beside it by nvidia-smi.

    python scripts/device/host_sync_diag.py PROBLEM.py CANDIDATE.py --out DIR [--modes auto,spin,blocking]

Prints a table (mode, condition, repeat, medians, ratios, share of slow samples, SM clock) and writes every sample
to DIR/host_sync_diag.jsonl.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

FLAGS = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}  # cudaDeviceSchedule*


def cpu_now() -> int:
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def child(args) -> None:
    import torch

    if args.mode != "auto":
        with open("/proc/self/maps") as maps:
            paths = [p for line in maps if "/libcudart.so" in (p := line.split()[-1])]
        rt = ctypes.CDLL(paths[0] if paths else "libcudart.so")
        code = rt.cudaSetDeviceFlags(ctypes.c_uint(FLAGS[args.mode]))
        if code != 0:
            raise SystemExit(f"cudaSetDeviceFlags({args.mode}) returned {code}")
    problem, cand = load(args.problem, "problem"), load(args.candidate, "candidate")
    dev = torch.device("cuda")
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs()).to(dev).eval()
    torch.manual_seed(0)
    new = cand.ModelNew(*problem.get_init_inputs()).to(dev).eval()
    sets = []
    for s in range(3):
        torch.manual_seed(100 + s)
        sets.append([x.to(dev) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()])
    slot = [x.clone() if isinstance(x, torch.Tensor) else x for x in sets[0]]
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=dev)
    fns = {"ref": ref, "cand": new}
    rows = {k: [] for k in fns}

    def one(fn, i):
        for d, s in zip(slot, sets[i % 3]):
            if isinstance(d, torch.Tensor):
                d.copy_(s)
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        h0 = time.perf_counter()
        fn(*slot)
        host = time.perf_counter() - h0
        b.record()
        b.synchronize()
        return a.elapsed_time(b), host * 1e3

    with torch.no_grad():
        for k, fn in fns.items():
            for i in range(5):
                one(fn, i)
        torch.cuda.synchronize()
        i = 0
        while len(rows["cand"]) < args.iters:
            for k, fn in fns.items():
                for _ in range(args.block):
                    ms, host = one(fn, i)
                    rows[k].append((time.time(), ms, host, cpu_now()))
                    i += 1
    print(json.dumps(rows))


def sm_clock(path: Path, t0: float, t1: float) -> float | None:
    """The median SM clock (MHz) nvidia-smi logged between t0 and t1 (epoch seconds)."""
    from datetime import datetime

    seen = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            if t0 <= t <= t1:
                seen.append(float(parts[1]))
        except (ValueError, IndexError):
            continue
    return statistics.median(seen) if seen else None


def busy(on: bool):
    n = max(0, (os.cpu_count() or 2) - 2) if on else 0
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem")
    ap.add_argument("candidate")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--modes", default="auto,spin,blocking")
    ap.add_argument("--conditions", default="quiet,busy")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--mode", default="auto")
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    smi_path = args.out / "clocks.csv"
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu,power.draw",
                            "--format=csv,noheader,nounits", "-lms", "100"], stdout=open(smi_path, "w"),
                           stderr=subprocess.DEVNULL)
    out = open(args.out / "host_sync_diag.jsonl", "a")
    print(f"{'mode':9} {'cond':6} {'rep':>3} {'ref ms':>7} {'cand ms':>7} {'x med':>6} {'x mean':>6} "
          f"{'slow%':>6} {'cpus':>5} {'host ms':>7} {'SM MHz':>7} {'wall s':>6}", flush=True)
    try:
        for rep in range(args.repeats):
            for cond in args.conditions.split(","):
                for mode in args.modes.split(","):
                    procs = busy(cond == "busy")
                    t0 = time.time()
                    try:
                        r = subprocess.run([sys.executable, __file__, args.problem, args.candidate, "--child",
                                            "--mode", mode, "--iters", str(args.iters), "--block", str(args.block),
                                            "--out", str(args.out)], capture_output=True, text=True, timeout=300)
                    finally:
                        for p in procs:
                            p.kill()
                    if r.returncode != 0:
                        print(f"{mode} {cond} {rep}: failed\n{r.stderr[-3000:]}", flush=True)
                        continue
                    rows = json.loads(r.stdout.strip().splitlines()[-1])
                    ref = [x[1] for x in rows["ref"]]
                    cand = [x[1] for x in rows["cand"]]
                    floor = min(ref + cand)
                    slow = sum(v > 1.3 * floor for v in ref + cand) / len(ref + cand)
                    cpus = len({x[3] for x in rows["ref"] + rows["cand"]})
                    host = statistics.median([x[2] for x in rows["ref"]])
                    times = [x[0] for x in rows["ref"] + rows["cand"]]
                    clock = sm_clock(smi_path, min(times), max(times))
                    print(f"{mode:9} {cond:6} {rep:>3} {statistics.median(ref):7.2f} {statistics.median(cand):7.2f} "
                          f"{statistics.median(ref) / statistics.median(cand):6.3f} "
                          f"{statistics.fmean(ref) / statistics.fmean(cand):6.3f} {slow:6.0%} {cpus:5} {host:7.2f} "
                          f"{clock or float('nan'):7.0f} "
                          f"{time.time() - t0:6.1f}", flush=True)
                    out.write(json.dumps({"mode": mode, "condition": cond, "repeat": rep, **rows}) + "\n")
                    out.flush()
    finally:
        smi.terminate()


if __name__ == "__main__":
    main()
