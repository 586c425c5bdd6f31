"""Where does the spread of a ~1 ms kernel's timing come from? One process, one GPU, several ways of timing the same
reference and candidate, repeated, with clocks and temperatures read between repeats.

    python scripts/noise_probe.py [--problem P --candidate C] [--repeats 5] [--out DIR]

Methods: `timer` is the Reviewer's Timer (L2 flush, rotating inputs, device sync per call); `timer+sleep` is the same
with a short GPU sleep queued before each start event so the host's launch overhead overlaps it (the event pair then
brackets GPU work only); `plain` is one event pair around 100 back-to-back calls. Prints, per method, the spread
max/min of the speedup over the repeats, and per-sample percentiles.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = ROOT / "tests" / "data"


def gpu_state() -> str:
    q = "clocks.sm,clocks.mem,temperature.gpu,temperature.memory,power.draw,clocks_throttle_reasons.active"
    r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True)
    return r.stdout.strip()


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))]


def main() -> None:
    import torch

    from kernelskill.problem import instantiate_problem, read_problem
    from kernelskill.review.timing import Timer, plain_event_loop

    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default="problems/gpu/g04_pointwise_chain_256m.py")
    parser.add_argument("--candidate", default="candidates/g04_pointwise_chain_256m/triton_ok.py")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    loaded = instantiate_problem(read_problem(DATA / args.problem))
    spec = importlib.util.spec_from_file_location("cand", DATA / args.candidate)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    ref = loaded.model_cls(*loaded.get_init_inputs()).to(dev)
    cand = mod.ModelNew(*loaded.get_init_inputs()).to(dev)
    sets = []
    for seed in range(3):
        torch.manual_seed(seed)
        sets.append([a.to(dev) if isinstance(a, torch.Tensor) else a for a in loaded.get_inputs()])

    record: dict = {}
    for name in ("timer", "timer+sleep", "plain"):
        speedups, cand_ms, ref_ms, samples = [], [], [], []
        for i in range(args.repeats):
            before = gpu_state()
            if name == "plain":
                r, c = plain_event_loop(ref, sets[0]), plain_event_loop(cand, sets[0])
                s_c = []
            else:
                timer = Timer(dev, prefill=name == "timer+sleep")  # the spin before each sample
                got, _, _ = timer.run({"ref": ref, "cand": cand}, sets, warmup=25, iters=100)
                r, c = statistics.fmean(got["ref"]), statistics.fmean(got["cand"])
                s_c = got["cand"]
                samples.append(s_c)
            speedups.append(r / c)
            cand_ms.append(c)
            ref_ms.append(r)
            extra = ""
            if s_c:
                extra = (f" cand p05 {pct(s_c, .05):.4f} p50 {pct(s_c, .5):.4f} p95 {pct(s_c, .95):.4f} "
                         f"max {max(s_c):.4f}")
            print(f"{name:<12} {i + 1}: ref {r:.4f} cand {c:.4f} speedup {r / c:.4f}{extra}  | {before}", flush=True)
        spread = max(speedups) / min(speedups)
        med = [r / statistics.median(s) for r, s in zip(ref_ms, samples)] if samples else []
        print(f"{name:<12} spread max/min {spread:.4f}; cand ms spread {max(cand_ms) / min(cand_ms):.4f}; "
              f"ref ms spread {max(ref_ms) / min(ref_ms):.4f}"
              + (f"; median-based speedup spread {max(med) / min(med):.4f}" if med else ""), flush=True)
        record[name] = {"speedups": speedups, "cand_ms": cand_ms, "ref_ms": ref_ms, "samples": samples}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "noise_probe.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
