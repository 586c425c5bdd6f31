"""What does a CUDA-graph capture that fails leave wrong in the process that made it?

Session 24 (H100): CUDA-L1's L1/32 HardTanh (a clone on torch's current stream, then a kernel on the legacy default
stream) failed the judge's trials on fresh inputs (about 246,600 of 262,144 elements wrong) in every judged review
in which the candidate runner's graphed Timer had first tried to capture one call and failed. First suspect, the
caching allocator's capture pool (torch's capture_end raises before it ends the capture there): not it, by this
script's first run. What it found: after a failed capture every random draw on the GPU raised ("Offset increment
outside graph capture encountered unexpectedly"), so the runner made its inputs on the CPU, other values than the
reference runner's for the same seed. graphed.capturing now gives the generator back its state.

Each scenario runs in a fresh process: `fails` failed captures of the candidate, by torch.cuda.graph alone as the
Timer made them before session 24, or `fix`ed (graphed._capture_one, through graphed.capturing), then a capture of
torch.sigmoid that succeeds (does its output's memory come from its own pool?), then one random draw on the GPU
(does it work?), then `trials` eager calls on fresh inputs (made on the CPU), each checked against torch.clamp.
Prints one row a scenario and writes DIR/aftermath.jsonl. Last, the whole judged review of the kernel as the landed
code makes it, without the safety net's second review (verdict.after_failed_capture).

    python scripts/device/capture_aftermath.py --out DIR [--kernel tests/data/public/cuda_l1/L1_32_kernel.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

SCENARIOS = [
    {"fails": 0, "fix": False},
    {"fails": 1, "fix": False},
    {"fails": 2, "fix": False},
    {"fails": 1, "fix": True},
    {"fails": 2, "fix": True},
]


def pool_of(torch, ptr: int):
    for seg in torch.cuda.memory._snapshot()["segments"]:
        if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
            return list(seg.get("segment_pool_id") or [])
    return None


def child(kernel: str, fails: int, fix: bool, trials: int) -> dict:
    import torch

    from kernelskill.review import graphed

    spec = importlib.util.spec_from_file_location("candidate", kernel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew().cuda()
    device = torch.device("cuda", torch.cuda.current_device())
    x0 = torch.randn(16, 16384).to(device)  # on the CPU: after a failed capture the GPU's random draws raised
    model(x0)
    torch.cuda.synchronize()
    stream = torch.cuda.ExternalStream(2, device=device)
    whys = []
    for _ in range(fails):
        current = torch.cuda.current_stream(device)
        if fix:  # the landed capture: graphed.capturing ends and releases a failed capture's pool
            whys.append(graphed._capture_one(lambda a: model(a), [x0], stream, device))
            continue
        graph = torch.cuda.CUDAGraph()  # as before session 24: torch.cuda.graph alone
        try:
            with torch.cuda.graph(graph, stream=stream):
                model(x0)
            whys.append(None)
        except Exception as exc:  # noqa: BLE001
            torch.cuda.set_stream(current)
            graphed.settle(torch.cuda, device)
            whys.append(f"{type(exc).__name__}: {str(exc)[:120]}")
        del graph
    a = torch.randn(1 << 16).to(device)
    ok = torch.cuda.CUDAGraph()
    with torch.cuda.graph(ok, stream=stream):
        b = torch.sigmoid(a)
    torch.cuda.set_stream(torch.cuda.current_stream(device))
    ok.replay()
    torch.cuda.synchronize()
    good_pool, b_pool = list(ok.pool()), pool_of(torch, b.data_ptr())
    wrong, kept = [], []
    for _ in range(trials):
        x = torch.randn(16, 16384).to(device)
        y = model(x)
        kept.append(y)
        ref = torch.clamp(x, -1, 1)
        torch.cuda.synchronize()
        wrong.append(int((~torch.isclose(y, ref, atol=1e-2, rtol=1e-2)).sum()))
    try:
        torch.randn(4, device=device)
        rng = "ok"
    except RuntimeError as exc:
        rng = str(exc)[:80]
    return {"fails": fails, "fix": fix, "whys": whys, "good_graph_pool": good_pool, "its_output_pool": b_pool,
            "wrong": wrong, "gpu_rng": rng, "stream_after": str(torch.cuda.current_stream(device))}


def judged_review(problem: str, kernel: str, logs: Path) -> dict:
    """The whole judged review of the kernel (kernelbench rules, graphed protocol), without the second review that
    verdict.after_failed_capture asks for after a failed capture: the first review's verdict as it stands."""
    from kernelskill.candidate import read_candidate
    from kernelskill.review import reviewer
    from kernelskill.settings import ReviewSettings

    reviewer.after_failed_capture = lambda *args: False
    settings = ReviewSettings(device="cuda", rules="kernelbench", timing_protocol="graphed")
    r = reviewer.review(Path(problem), read_candidate(Path(kernel), settings.backend), settings, log_dir=logs)
    return {"correct": r.correct, "error_kind": r.error_kind, "error": (r.error or "")[:400],
            "method": r.timing.method if r.timing else None, "speedup": r.speedup}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", default="tests/data/public/cuda_l1/L1_32_kernel.py")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--problem", default="tests/data/public/cuda_l1/L1_32_problem.py")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.kernel, **json.loads(args.child), trials=args.trials)))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{'fails':>5} {'fix':>5}  {'good graph pool':>16} {'its output in':>16}  {'a GPU random draw':<40} "
          "wrong elements per trial")
    for sc in SCENARIOS:
        proc = subprocess.run([sys.executable, __file__, "--out", args.out, "--kernel", args.kernel,
                               "--trials", str(args.trials), "--child", json.dumps(sc)],
                              capture_output=True, text=True, timeout=240)
        if proc.returncode:
            row = {**sc, "error": proc.stderr[-2000:]}
            print(f"{sc['fails']:>5} {sc['fix']!s:>5}  child failed: {proc.stderr[-600:]}")
        else:
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"{row['fails']:>5} {row['fix']!s:>5}  {row['good_graph_pool']!s:>16} {row['its_output_pool']!s:>16}"
                  f"  {row['gpu_rng'][:40]:<40} {row['wrong']}")
            for why in row["whys"]:
                print(f"{'':13}capture: {str(why).splitlines()[0][:150]}")
        rows.append(row)
    review = judged_review(args.problem, args.kernel, out / "review")
    print(f"the judged review, no second review: correct {review['correct']} ({review['error_kind']}: "
          f"{review['error'][:200]}); timing: {str(review['method'])[:300]}")
    rows.append({"judged_review": review})
    (out / "aftermath.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
