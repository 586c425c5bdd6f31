"""The profiling driver: one (problem, candidate) pair in a process of its own, started by `profiling.run_profile`.

    python -m kernelskill.profiling.driver ncu PROBLEM CANDIDATE [--warmup N]
        N warm-up forwards, then one forward between cudaProfilerStart/Stop (run under ncu)
    python -m kernelskill.profiling.driver profile PROBLEM CANDIDATE --out OUT [--warmup N] [--forwards M]
        N warm-up forwards, then the mean forward time (CUDA events) and the PyTorch profiler's kernels over M
        forwards -> OUT (JSON, the ProfilerSummary of evidence.py)
    python -m kernelskill.profiling.driver check PROBLEM CANDIDATE --out OUT
        build, copy parameters, compare one forward with Model's on any device -> OUT

The problem is loaded as the review worker loads it (`kernelskill.problem`), the candidate from its file (Triton
reads kernel sources with inspect). `Model` and `ModelNew` are built from `get_init_inputs()` under the same seed;
the reference's parameters and buffers are copied into the candidate where name and shape match, so both compute
with the same weights. The exit codes are `profiling`'s, which reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

from kernelskill.profiling.run import EXIT_NO_GPU, EXIT_PROFILER, EXIT_SETUP

MODES = ("ncu", "profile", "check")
SEED = 0


def _to(value, device):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def _build(problem_path: Path, candidate_path: Path, device: str, keep_reference: bool = False):
    """ModelNew with Model's parameters (where name and shape match), and the inputs, on `device`."""
    import torch

    from kernelskill.problem import call_entry, instantiate_problem, load_module, read_problem

    problem = read_problem(problem_path)
    loaded = instantiate_problem(problem, "kernelskill_profiled_problem")
    candidate = load_module(candidate_path.read_text(), str(candidate_path), "kernelskill_profiled_candidate")
    init = call_entry(problem, loaded.get_init_inputs, "get_init_inputs")
    torch.manual_seed(SEED)
    reference = loaded.model_cls(*init)
    torch.manual_seed(SEED)
    model = candidate.ModelNew(*init)
    ref_state = reference.state_dict()
    copied, kept = [], []
    with torch.no_grad():
        for name, value in model.state_dict().items():
            source = ref_state.get(name)
            if source is not None and tuple(source.shape) == tuple(value.shape):
                value.copy_(source)
                copied.append(name)
            else:
                kept.append(name)
    del ref_state
    reference = reference.to(device) if keep_reference else None
    model = model.to(device)
    torch.manual_seed(SEED)
    inputs = _to(call_entry(problem, loaded.get_inputs, "get_inputs"), device)
    return model, reference, inputs, copied, kept


def _max_abs_diff(a, b):
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape:
            return None
        return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        diffs = [_max_abs_diff(x, y) for x, y in zip(a, b)]
        return None if None in diffs else max(diffs, default=0.0)
    return None


def _describe(out):
    import torch

    if isinstance(out, torch.Tensor):
        return {"shape": list(out.shape), "dtype": str(out.dtype), "device": str(out.device)}
    if isinstance(out, (list, tuple)):
        return [_describe(o) for o in out]
    return repr(out)[:200]


def _kernels(prof) -> list[dict]:
    # The Chrome trace is the export that stays stable across PyTorch versions: GPU kernels have "cat": "kernel".
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    kernels: dict[str, dict] = {}
    for event in trace.get("traceEvents", []):
        if str(event.get("cat", "")).lower() == "kernel" and "dur" in event:
            entry = kernels.setdefault(event["name"], {"name": event["name"], "count": 0, "total_time_us": 0.0})
            entry["count"] += 1
            entry["total_time_us"] += float(event["dur"])
    return sorted(kernels.values(), key=lambda k: -k["total_time_us"])


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kernelskill.profiling.driver",
                                     description="Run one forward of a candidate the way kernelskill profiles it.")
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("problem", type=Path)
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--out", type=Path, help="where profile and check write their JSON")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up forwards before anything is measured")
    parser.add_argument("--forwards", type=int, default=10, help="forwards timed and recorded by the profiler")
    args = parser.parse_args(argv)
    if args.mode != "ncu" and args.out is None:
        parser.error(f"{args.mode} writes its result to --out")
    if args.warmup < 1 or args.forwards < 1:
        parser.error("warm-up and profiled forwards must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    mode = args.mode
    try:
        import torch

        from kernelskill.review.timing import plain_event_loop

        if mode == "check":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif torch.cuda.is_available():
            device = "cuda"
        else:
            print("kernelskill-driver: no CUDA device is visible to PyTorch", file=sys.stderr)
            return EXIT_NO_GPU
        model, reference, inputs, copied, kept = _build(args.problem, args.candidate, device,
                                                        keep_reference=mode == "check")
        print(f"kernelskill-driver: copied {len(copied)} parameter(s)/buffer(s) from Model, kept "
              f"{len(kept)} of ModelNew's own", file=sys.stderr)
        with torch.no_grad():
            if mode == "check":
                out = model(*inputs)
                expected = reference(*inputs)
                result = {"device": device, "copied": copied, "kept": kept, "output": _describe(out),
                          "max_abs_diff": _max_abs_diff(out, expected)}
                args.out.write_text(json.dumps(result))
                return 0
            for _ in range(args.warmup):
                model(*inputs)
            torch.cuda.synchronize()
            if mode == "ncu":
                torch.cuda.cudart().cudaProfilerStart()
                model(*inputs)
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStop()
                return 0
            # warmed up above: one event pair around the forwards
            forward_time_us = plain_event_loop(model, inputs, warmup=0, iters=args.forwards) * 1000.0
    except Exception:
        traceback.print_exc()
        return EXIT_SETUP
    try:
        from torch.profiler import ProfilerActivity, profile

        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(args.forwards):
                model(*inputs)
            torch.cuda.synchronize()
        summary = {"source": "torch.profiler", "forwards": args.forwards, "forward_time_us": forward_time_us,
                   "kernels": _kernels(prof)}
        args.out.write_text(json.dumps(summary, indent=2))
    except Exception:
        traceback.print_exc()
        return EXIT_PROFILER
    return 0


if __name__ == "__main__":
    from kernelskill.review.confine import apply as confine

    # first, before torch starts threads: the sandbox a review worker gets; profiling reads this line
    print("kernelskill-driver: sandbox: " + json.dumps(confine()), file=sys.stderr, flush=True)
    sys.exit(main(sys.argv[1:]))
