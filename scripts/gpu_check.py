"""End-to-end check of the Reviewer on a real GPU: verdicts, compile times, timings, cheats, timing noise.

Run on a CUDA machine from the repository root:

    python scripts/gpu_check.py --part review     # correct and broken Triton/CUDA candidates (issue: foundation)
    python scripts/gpu_check.py --part cheats     # every cheat, guard on and guard off (issue: honest verdicts)
    python scripts/gpu_check.py --part noise      # 5 repeated reviews vs a plain event loop; torch.compile baseline

Each part prints a table and, with --out DIR, writes the full results as JSON there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = ROOT / "tests" / "data"

from kernelskill.candidate import read_candidate  # noqa: E402
from kernelskill.review.reviewer import review  # noqa: E402
from kernelskill.settings import Guards, ReviewSettings, StageTimeouts  # noqa: E402

P01 = "problems/p01_pointwise_gelu_chain.py"
G01 = "problems/gpu/g01_pointwise_chain_64m.py"
G02 = "problems/gpu/g02_row_softmax_16384x8192.py"
G03 = "problems/gpu/g03_linear_bias_relu_4096.py"
G04 = "problems/gpu/g04_pointwise_chain_256m.py"  # a fused kernel of about 1 ms, for the noise measurement

REVIEW_CASES = [
    ("p01 gelu chain, triton", P01, "candidates/p01_pointwise_gelu_chain/triton_ok.py", "correct"),
    ("p02 row softmax, triton", "problems/p02_row_softmax.py", "candidates/p02_row_softmax/triton_ok.py", "correct"),
    ("p04 layernorm, triton", "problems/p04_layernorm.py", "candidates/p04_layernorm/triton_ok.py", "correct"),
    ("p08 linear+relu, triton", "problems/p08_linear_bias_relu.py", "candidates/p08_linear_bias_relu/triton_ok.py", "correct"),
    ("p09 conv2d epilogue, triton", "problems/p09_conv2d_relu_biasadd.py", "candidates/p09_conv2d_relu_biasadd/triton_ok.py", "correct"),
    ("p11 silu n=4099, triton", "problems/p11_silu_tail_4099.py", "candidates/p11_silu_tail_4099/triton_ok.py", "correct"),
    ("p12 two outputs, triton", "problems/p12_two_outputs.py", "candidates/p12_two_outputs/triton_ok.py", "correct"),
    ("g01 pointwise 64M, triton", G01, "candidates/g01_pointwise_chain_64m/triton_ok.py", "correct"),
    ("g02 softmax 16k x 8k, triton", G02, "candidates/g02_row_softmax_16384x8192/triton_ok.py", "correct"),
    ("g03 linear 4096^3, triton", G03, "candidates/g03_linear_bias_relu_4096/triton_ok.py", "correct"),
    ("g01 pointwise 64M, cuda", G01, "candidates/g01_pointwise_chain_64m/cuda_ok.py", "correct"),
    ("p02 row softmax, cuda", "problems/p02_row_softmax.py", "candidates/p02_row_softmax/cuda_ok.py", "correct"),
    ("p01 gelu chain, cuda split", P01, "candidates/p01_pointwise_gelu_chain/cuda_split_ok.py", "correct"),
    ("g01 pointwise 64M, cuda split", G01, "candidates/g01_pointwise_chain_64m/cuda_split_ok.py", "correct"),
    ("syntax error", P01, "candidates/broken/syntax_error.py", "compile_error"),
    ("cuda compile error", P01, "candidates/broken/cuda_compile_error.py", "compile_error"),
    ("wrong result", "problems/p02_row_softmax.py", "candidates/broken/wrong_result.py", "mismatch"),
    ("tail bug (n=4099)", "problems/p11_silu_tail_4099.py", "candidates/broken/tail_bug.py", "mismatch"),
    ("wrong shape", "problems/p07_mean_dim.py", "candidates/broken/wrong_shape.py", "mismatch"),
    ("NaN output", "problems/p13_scaled_leaky_relu.py", "candidates/broken/nan_output.py", "mismatch"),
    ("raises in forward", "problems/p02_row_softmax.py", "candidates/broken/runtime_error.py", "runtime_error"),
    ("hang (verify limit 20 s)", P01, "candidates/broken/hang.py", "timeout"),
    ("os.abort()", "problems/p02_row_softmax.py", "candidates/broken/crash.py", "crash"),
    ("illegal memory access", P01, "candidates/broken/illegal_memory_access.py", "crash"),
    ("correct one right after it", P01, "candidates/p01_pointwise_gelu_chain/triton_ok.py", "correct"),
]

# (cheat, problem, settings, guards turned off for the second run). The second run is made on the GPU only for the
# cheats that need CUDA to work at all (the CPU test suite runs every cheat with its guard off).
GPU_GUARD_OFF = {"memory_reuse", "side_stream", "input_mutation", "cache_call_count", "tensor_subclass", "known_seed"}
CHEAT_CASES = [
    ("memory_reuse", P01, {"order": "reference_first"}, {"poison_freed_memory": False}),
    ("side_stream", G01, {}, {"device_sync": False}),
    ("input_mutation", P01, {"order": "candidate_first", "timing": False}, {"clone_inputs": False}),
    ("cache_call_count", P01, {"reverify_above": 1e9}, {"timed_outputs": False}),
    ("cache_pointer", P01, {"reverify_above": 1e9}, {"timed_outputs": False}),
    ("known_seed", P01, {"timing": False}, {"secret_seeds": False}),
    ("thread_import", P01, {}, {"static_checks": False}),
    ("thread_obfuscated", P01, {}, {"static_checks": False}),
    ("tensor_subclass", P01, {}, {"output_types": False}),
    ("lazy_output", P01, {}, {"output_types": False}),
    ("patch_isclose", P01, {}, {"static_checks": False}),
    ("patch_hidden", P01, {}, {"integrity": False}),
    ("patch_timer", P01, {}, {"static_checks": False}),
    ("frame_walk", P01, {"order": "reference_first", "timing": False}, {"static_checks": False}),
    ("try_fallback", P01, {}, {"static_checks": False}),
    ("subclass_model", P01, {}, {"static_checks": False}),
    ("no_kernel", P01, {}, {"kernel_policy": False}),
    ("ghost_kernel", P01, {}, {"kernel_policy": False}),
]


def run(problem: str, candidate: str, **settings):
    settings.setdefault("timeouts", StageTimeouts(verify=60))
    s = ReviewSettings(device="cuda", **settings)
    t0 = time.perf_counter()
    r = review(DATA / problem, read_candidate(DATA / candidate), s)
    return r, time.perf_counter() - t0


def outcome(r) -> str:
    if r.correct:
        return "correct"
    if r.error_kind == "rejected":
        return r.checks[0].name
    return r.error_kind or "?"


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def part_review(out: list) -> None:
    print(f"{'case':32} {'expected':14} {'verdict':14} {'ok':3} {'stage':8} {'build s':>8} {'ref ms':>9} {'cand ms':>9} {'speedup':>8} {'wall s':>7}")
    for label, problem, candidate, expected in REVIEW_CASES:
        if ONLY and not any(word in label for word in ONLY):
            continue
        overrides = {"timeouts": StageTimeouts(verify=20)} if "hang" in label else {}
        r, wall = run(problem, candidate, **overrides)
        got = outcome(r)
        build = None if r.compile is None else r.compile.duration_s + (r.compile.first_call_s or 0)
        print(f"{label:32} {expected:14} {got:14} {'yes' if got == expected else 'NO':3} {str(r.stage):8} {fmt(build, '.2f'):>8} "
              f"{fmt(r.ref_ms):>9} {fmt(r.candidate_ms):>9} {fmt(r.speedup, '.2f'):>8} {wall:7.1f}", flush=True)
        if got != expected:
            print(f"    error: {(r.error or '')[:400]}", flush=True)
        out.append({"case": label, "expected": expected, "got": got, **r.model_dump(mode="json", exclude={"log"})})


def part_cheats(out: list) -> None:
    print(f"{'cheat':18} {'guards on: verdict':32} {'caught':6} | {'guard turned off':22} {'verdict':30} {'speedup':>8}")
    for name, problem, settings, off in CHEAT_CASES:
        if ONLY and name not in ONLY:
            continue
        on, _ = run(problem, f"cheats/{name}.py", **settings)
        caught = not on.correct or (name == "side_stream" and "work_outside_current_stream" in on.flags)
        line = f"{name:18} {outcome(on):32} {'yes' if caught else 'NO':6} | "
        record = {"cheat": name, "on": on.model_dump(mode="json", exclude={"log"}), "guards_off": off}
        if name in GPU_GUARD_OFF:
            without, _ = run(problem, f"cheats/{name}.py", guards=Guards(**off), **settings)
            line += f"{','.join(off):22} {outcome(without):30} {fmt(without.speedup, '.2f'):>8}"
            record["off"] = without.model_dump(mode="json", exclude={"log"})
        if name == "side_stream":
            line += f"  (guard on: {fmt(on.speedup, '.2f')}x, flags {on.flags})"
        if not caught:
            line += f"  error: {on.error}"
        print(line, flush=True)
        out.append(record)


def gpu_state() -> str:
    """SM and memory clocks, temperature and power as nvidia-smi reports them (clocks are not locked here)."""
    import subprocess

    query = "clocks.sm,clocks.mem,temperature.gpu,power.draw"
    proc = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True)
    return proc.stdout.strip() or proc.stderr.strip()


def part_noise(out: list) -> None:
    import torch

    from kernelskill.problem import instantiate_problem, read_problem
    from kernelskill.review.timing import plain_event_loop

    problem, candidate = G04, "candidates/g04_pointwise_chain_256m/triton_ok.py"
    ours, reviews = [], []
    for i in range(5):
        before = gpu_state()
        r, _ = run(problem, candidate)
        ours.append(r.speedup)
        c = r.timing.candidate
        print(f"review {i + 1}: ref {r.ref_ms:.4f} ms  cand {r.candidate_ms:.4f} ms (min {c.min_ms:.4f}, max "
              f"{c.max_ms:.4f}, std {c.std_ms:.4f})  speedup {r.speedup:.4f} (median-based {r.timing.speedup_median:.4f})"
              f"  gpu before/after: {before} / {gpu_state()}", flush=True)
        reviews.append(r.timing.model_dump(mode="json"))  # every sample, to study where the spread comes from
    # the common published method, in this process: one event pair around 100 calls on the same inputs
    loaded = instantiate_problem(read_problem(DATA / problem))
    import importlib.util

    spec = importlib.util.spec_from_file_location("cand", DATA / candidate)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    ref = loaded.model_cls(*loaded.get_init_inputs()).cuda()
    cand = mod.ModelNew(*loaded.get_init_inputs()).cuda()
    args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in loaded.get_inputs()]
    plain = []
    for i in range(5):
        r_ms, c_ms = plain_event_loop(ref, args), plain_event_loop(cand, args)
        plain.append(r_ms / c_ms)
        print(f"plain loop {i + 1}: ref {r_ms:.4f} ms  cand {c_ms:.4f} ms  speedup {r_ms / c_ms:.4f}", flush=True)
    spread = lambda v: max(v) / min(v)  # noqa: E731
    print(f"\nspeedup spread max/min over 5 runs: reviewer {spread(ours):.4f} (mean {statistics.fmean(ours):.3f}x), "
          f"plain event loop {spread(plain):.4f} (mean {statistics.fmean(plain):.3f}x)")
    record = {"reviewer_speedups": ours, "plain_speedups": plain, "review_timings": reviews}
    out.append(record)


def part_baseline(out: list) -> None:
    r, _ = run(G01, "candidates/g01_pointwise_chain_64m/triton_ok.py", baseline="compile")
    out.append({"compile_baseline": r.model_dump(mode="json", exclude={"log"})})
    if r.compile_ms is None:
        print(f"--baseline compile failed: {r.error}")
        return
    print(f"--baseline compile: eager {r.ref_ms:.4f} ms, torch.compile {r.compile_ms:.4f} ms, candidate "
          f"{r.candidate_ms:.4f} ms, speedup {r.speedup:.3f}x vs eager, {r.speedup_vs_compile:.3f}x vs compile")


ONLY: set[str] = set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["review", "cheats", "noise", "baseline"], action="append", required=True)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", action="append", default=[], help="cheats: only these (file stem); review: only cases whose label contains this (repeatable)")
    args = parser.parse_args()
    ONLY.update(args.only)
    for part in args.part:
        print(f"\n== {part} ==", flush=True)
        results: list = []
        {"review": part_review, "cheats": part_cheats, "noise": part_noise, "baseline": part_baseline}[part](results)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"gpu_check_{part}.json").write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
