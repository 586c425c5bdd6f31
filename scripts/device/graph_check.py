"""Could the judge's batch run as a CUDA graph? For corpus tasks, whether the reference and the kernel can be
captured, whether a replay gives the eager calls' exact bytes, and the pace of each way.

Session 15 found the judged figure of host-bound kernels (a few us of GPU work, launches three times longer)
scattering 0.43x-2.38x: the batch's calls run from Python at their launches' pace, which no event claim can be
confirmed against. A batch replayed from a graph runs at the GPU's pace, but a capture records only the stream it
captures: a kernel launched on the legacy default stream (most `<<<...>>>` launches in the corpus name no stream)
either breaks the capture or is left out of it. This measures which, task by task:

    python scripts/device/graph_check.py --corpus .devdata/corpus --out DIR [--level 1] [--tasks 19,20,21] [--budget 400]
        [--per-thread]

Each task runs in a child process of its own (the corpus's code, unconfined: this is a diagnostic for the GPU
machine, never part of a review), one model at a time: `ref` (Model) and `new` (ModelNew). For each: the eager
pace of CALLS back-to-back calls on CALLS input sets, each output copied into its row of one block (as the judge's
batch keeps outputs); then torch.cuda.graph over the same calls (a warm-up on a side stream first, as torch asks);
if it captured, the replay's pace and whether its block equals the eager block byte for byte. Rows go to
DIR/graph_check.jsonl as they finish (a second run with the same DIR skips the tasks done) and a table is printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

CALLS = 200
SET_BYTES = 2 << 30  # input sets held at once, at most


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def measure(torch, fn, sets: list, capture_stream=None) -> dict:
    """Eager pace, capture, replay pace and equality for one model over these input sets (put back before each
    pass: a forward may write into its inputs). `capture_stream`: the stream to capture on (torch's own else)."""
    out: dict = {}
    pristine = [[x.clone() if isinstance(x, torch.Tensor) else x for x in args] for args in sets]

    def reset() -> None:
        for args, clean in zip(sets, pristine):
            for x, c in zip(args, clean):
                if isinstance(x, torch.Tensor):
                    x.copy_(c)

    def shifted() -> None:  # each set holds the next set's contents: a capture made on them, replayed after
        # reset(), computes the eager calls' bytes only if every kernel is in the graph (one launched on the legacy
        # stream beside torch's non-blocking capture stream runs once, at the capture, and is not replayed)
        for args, clean in zip(sets, pristine[1:] + pristine[:1]):
            for x, c in zip(args, clean):
                if isinstance(x, torch.Tensor):
                    x.copy_(c)

    def same(a, b) -> bool:  # byte for byte (NaN included)
        return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))

    with torch.no_grad():
        first = fn(*sets[0])
        if not isinstance(first, torch.Tensor):
            return {"error": f"returns {type(first).__name__}, not one tensor"}
        block = torch.empty((len(sets), *first.shape), dtype=first.dtype, device=first.device)
        for _ in range(2):
            for i, args in enumerate(sets):
                block[i].copy_(fn(*args))
        reset()
        torch.cuda.synchronize()
        began = time.perf_counter()
        for i, args in enumerate(sets):
            block[i].copy_(fn(*args))
        torch.cuda.synchronize()
        out["eager_us"] = round((time.perf_counter() - began) / len(sets) * 1e6, 2)
        eager = block.clone()
        side = capture_stream or torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # torch's advice: warm up on a side stream before capturing
            for i, args in enumerate(sets[:3]):
                block[i].copy_(fn(*args))
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        shifted()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=capture_stream):
                for i, args in enumerate(sets):
                    block[i].copy_(fn(*args))
        except Exception as exc:  # noqa: BLE001 - the finding
            out["captured"] = False
            out["capture_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            torch.cuda.synchronize()
            return out
        out["captured"] = True
        block.zero_()
        reset()
        graph.replay()
        torch.cuda.synchronize()
        out["replay_equal"] = same(block, eager)
        paces = []
        for _ in range(3):
            began = time.perf_counter()
            graph.replay()
            torch.cuda.synchronize()
            paces.append((time.perf_counter() - began) / len(sets) * 1e6)
        out["replay_us"] = round(min(paces), 2)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*sets[0])
        end.record()
        end.synchronize()
        out["one_call_event_us"] = round(start.elapsed_time(end) * 1e3, 2)
    return out


def child(problem: str, kernel: str, per_thread: bool = False, capture_pt: bool = False) -> dict:
    if per_thread:  # `<<<...>>>` launches that name no stream go to the per-thread default stream, which (unlike
        # the legacy one) may be captured: the kernel built afresh with nvcc's flag, captured on that stream
        import os
        import tempfile

        os.environ["NVCC_APPEND_FLAGS"] = "--default-stream per-thread"
        os.environ["TORCH_EXTENSIONS_DIR"] = tempfile.mkdtemp(prefix="graph-check-ext-")
    import torch

    dev = torch.device("cuda")
    prob = load(problem, "problem")
    row: dict = {}
    torch.manual_seed(0)
    one = prob.get_inputs()
    nbytes = sum(x.numel() * x.element_size() for x in one if isinstance(x, torch.Tensor))
    count = max(3, min(CALLS, SET_BYTES // max(1, nbytes)))  # as the judge's batch, bounded by bytes
    sets = [[x.to(dev) if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()] for _ in range(count)]
    row["calls"] = count
    for side, make in (("ref", lambda: prob.Model(*prob.get_init_inputs())),
                       ("new", lambda: load(kernel, "kernel").ModelNew(*prob.get_init_inputs()))):
        try:
            torch.manual_seed(0)
            model = make().to(dev)
            per_thread_stream = torch.cuda.ExternalStream(2) if per_thread or capture_pt else None  # cudaStreamPerThread
            row[side] = measure(torch, model, sets, per_thread_stream)
        except Exception as exc:  # noqa: BLE001 - the finding
            row[side] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}", "trace": traceback.format_exc()[-400:]}
        torch.cuda.synchronize()
    src = Path(kernel).read_text(errors="replace")
    row["kernel_launches"] = src.count("<<<")
    row["load_inline"] = "load_inline" in src
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=Path(".devdata/corpus"))
    p.add_argument("--out", type=Path)
    p.add_argument("--level", default="1")
    p.add_argument("--tasks", default="", help="numeric prefixes, e.g. 19,20,21 (default: all the level's kernels)")
    p.add_argument("--budget", type=float, default=400.0, help="seconds; the tasks left wait for the next run")
    p.add_argument("--per-task", type=float, default=150.0, help="seconds a task's child may take (builds included)")
    p.add_argument("--per-thread", action="store_true", help="build the kernels with nvcc's --default-stream "
                   "per-thread and capture on that stream (rows go to graph_check_per_thread.jsonl)")
    p.add_argument("--capture-per-thread", action="store_true", help="capture on the per-thread default stream, "
                   "the kernels built as they are (what the judge's runners do since session 17): a legacy-stream "
                   "launch should then fail the capture rather than escape it (rows: graph_check_capture_pt.jsonl)")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, per_thread=args.per_thread, capture_pt=args.capture_per_thread)))
        return
    if args.out is None:
        p.error("--out DIR is needed")
    entries = [e for e in json.loads((args.corpus / "corpus.json").read_text())["entries"]
               if e.get("kernel") and str(e["level"]) == args.level]
    wanted = {int(t) for t in args.tasks.split(",") if t.strip()}
    entries = [e for e in entries if not wanted or int(e["index"]) in wanted]
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / ("graph_check_per_thread.jsonl" if args.per_thread else
                            "graph_check_capture_pt.jsonl" if args.capture_per_thread else "graph_check.jsonl")
    done = {json.loads(line)["task"] for line in rows_path.read_text().splitlines()} if rows_path.exists() else set()
    deadline = time.monotonic() + args.budget
    with open(rows_path, "a") as f:
        for e in entries:
            task = f"L{e['level']}/{e['name']}"
            if task in done:
                continue
            if time.monotonic() > deadline:
                print(f"budget spent: {task} and after left for the next run (same --out)")
                break
            try:
                run = subprocess.run([sys.executable, __file__, "--child", str(args.corpus / e["problem"]),
                                      str(args.corpus / e["kernel"])] + (["--per-thread"] if args.per_thread else [])
                                     + (["--capture-per-thread"] if args.capture_per_thread else []),
                                     capture_output=True, text=True,
                                     timeout=args.per_task)
                lines = run.stdout.strip().splitlines()
                row = json.loads(lines[-1]) if run.returncode == 0 and lines else {"error": run.stderr[-400:]}
            except subprocess.TimeoutExpired:
                row = {"error": f"over {args.per_task:g} s"}
            row["task"] = task
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(line(row), flush=True)
    rows = [json.loads(x) for x in rows_path.read_text().splitlines()]
    for side in ("ref", "new"):
        got = [r[side] for r in rows if isinstance(r.get(side), dict) and "captured" in r[side]]
        equal = sum(1 for g in got if g.get("replay_equal"))
        print(f"{side}: {sum(1 for g in got if g['captured'])} of {len(got)} captured, {equal} replayed to the eager "
              f"bytes")


def line(row: dict) -> str:
    if "error" in row:
        return f"{row['task'][:40]:40s} failed: {row['error'][-160:]}"

    def side(s: dict) -> str:
        if "error" in s:
            return f"error {s['error'][:40]}"
        if not s.get("captured"):
            return f"eager {s['eager_us']:.1f} us, no capture ({s.get('capture_error', '')[:40]})"
        return (f"eager {s['eager_us']:.1f} us, replay {s['replay_us']:.1f} us "
                f"{'=' if s['replay_equal'] else 'DIFFERS'}, event {s['one_call_event_us']:.1f} us")

    return (f"{row['task'][:40]:40s} <<<>>> {row['kernel_launches']}  ref: {side(row['ref'])} | "
            f"new: {side(row['new'])}")


if __name__ == "__main__":
    main()
