"""What does a CUDA-graph capture that fails leave wrong in the process that made it?

Session 24 (H100): CUDA-L1's L1/32 HardTanh (a clone on torch's current stream, then a kernel on the legacy default
stream) failed the judge's trials on fresh inputs (about 246,500 of 262,144 elements wrong) in every judged review
in which the candidate runner's graphed Timer had first tried to capture one call and failed, though its single-call
capture ends with nothing of the candidate half done. Suspect: torch's CUDAGraph.capture_end raises when
cudaStreamEndCapture fails, before it tells the caching allocator that the capture is over, so the allocator keeps
routing to the failed capture's private pool whatever its filter still matches.

Each scenario runs in a fresh process: `fails` failed captures of the candidate, by torch.cuda.graph alone as the
Timer made them before session 24, or `fix`ed (graphed._capture_one: graphed.capturing ends and releases the pool),
then a capture of torch.sigmoid that succeeds (where does its output's memory come from?), then `trials` eager
calls on fresh inputs, each checked against torch.clamp. Prints one row a scenario and writes DIR/aftermath.jsonl.

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
    x0 = torch.randn(16, 16384, device=device)
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
    a = torch.randn(1 << 16, device=device)
    ok = torch.cuda.CUDAGraph()
    with torch.cuda.graph(ok, stream=stream):
        b = torch.sigmoid(a)
    torch.cuda.set_stream(torch.cuda.current_stream(device))
    ok.replay()
    torch.cuda.synchronize()
    good_pool, b_pool = list(ok.pool()), pool_of(torch, b.data_ptr())
    wrong, kept = [], []
    for _ in range(trials):
        x = torch.randn(16, 16384, device=device)
        y = model(x)
        kept.append(y)
        ref = torch.clamp(x, -1, 1)
        torch.cuda.synchronize()
        wrong.append(int((~torch.isclose(y, ref, atol=1e-2, rtol=1e-2)).sum()))
    return {"fails": fails, "fix": fix, "whys": whys, "good_graph_pool": good_pool, "its_output_pool": b_pool,
            "wrong": wrong, "stream_after": str(torch.cuda.current_stream(device))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", default="tests/data/public/cuda_l1/L1_32_kernel.py")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.kernel, **json.loads(args.child), trials=args.trials)))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{'fails':>5} {'fix':>5}  {'good graph pool':>16} {'its output in':>16}  wrong elements per trial")
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
                  f"  {row['wrong']}")
            for why in row["whys"]:
                print(f"{'':13}capture: {why}")
        rows.append(row)
    (out / "aftermath.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
