"""KernelBench's own harness (`eval_kernel_against_ref`) over a corpus, for side-by-side comparison with ours.

KernelBench's source is not part of this repository: point --kernelbench at a checkout's `src` folder of the
revision the corpus was written for (for CUDA-L1: ScalingIntelligence/KernelBench at 21fbe5a, whose eval.py uses
atol = rtol = 1e-2, as our default). Its `utils` module pulls in LLM SDKs the harness does not use; where they are
missing an empty `utils` module is put in its place (eval_kernel_against_ref calls nothing from it).

Run on a CUDA machine, in two phases, resumable (results are appended to --out as JSON lines, done tasks skipped):

    python scripts/kernelbench_harness.py --kernelbench KB/src --corpus CORPUS --out kb.jsonl --phase build --jobs 12
    python scripts/kernelbench_harness.py --kernelbench KB/src --corpus CORPUS --out kb.jsonl --phase eval

`build` compiles every kernel's extensions with torch's load_inline in parallel processes (no GPU work), into
per-task build folders; `eval` then runs KernelBench's evaluation task after task in one process at a time (the
builds are found up to date): 5 correctness trials, 100 timed calls of the kernel, and the reference timed with the
same function, as KernelBench's baseline script does. A process that crashes or hangs costs that task only (it is
recorded as such); a fresh process takes over every --per-process tasks. Between tasks in one process the global
backend switches (cudnn.benchmark, TF32) are put back, where KernelBench starts a new process for each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _entries(corpus: Path, levels: set[str] | None) -> list[dict]:
    index = json.loads((corpus / "corpus.json").read_text())
    return [e for e in index["entries"] if e.get("kernel") and e.get("problem")
            and (levels is None or e["level"] in levels)]


def _key(e: dict) -> str:
    return f"L{e['level']}/{e['name']}"


def _done(out: Path, phase: str) -> set[str]:
    if not out.exists():
        return set()
    return {r["key"] for r in map(json.loads, out.read_text().splitlines()) if r.get("phase") == phase}


def _import_eval(src: Path):
    sys.path.insert(0, str(src.parent))
    try:
        import src.utils  # noqa: F401
    except Exception:  # noqa: BLE001 - SDKs the harness does not need; eval.py only imports the module
        sys.modules["src.utils"] = types.ModuleType("src.utils")
    from src import eval as kb_eval

    return kb_eval


def _flags(torch) -> dict:
    return {"benchmark": torch.backends.cudnn.benchmark, "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
            "precision": torch.get_float32_matmul_precision()}


def _restore(torch, flags: dict) -> None:
    torch.backends.cudnn.benchmark = flags["benchmark"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn_tf32"]
    torch.backends.cuda.matmul.allow_tf32 = flags["matmul_tf32"]
    torch.set_float32_matmul_precision(flags["precision"])


def serve(args) -> None:
    """One process: evaluate the keys given on stdin, one JSON line of result each on stdout."""
    import torch

    kb_eval = _import_eval(Path(args.kernelbench))
    corpus = Path(args.corpus)
    entries = {_key(e): e for e in _entries(corpus, None)}
    defaults = _flags(torch)
    device = torch.device("cuda", 0)
    for line in sys.stdin:
        key = line.strip()
        if not key:
            continue
        e = entries[key]
        ref = (corpus / e["problem"]).read_text()
        custom = (corpus / e["kernel"]).read_text()
        build_dir = str(Path(args.builds) / key.replace("/", "_"))
        start = time.perf_counter()
        row = {"key": key, "level": e["level"], "name": e["name"], "phase": args.phase}
        try:
            if args.phase == "build":
                context: dict = {}
                kb_eval.load_custom_model(custom, context, build_dir)
                row["built"] = True
            else:
                result = kb_eval.eval_kernel_against_ref(ref, custom, seed_num=42, num_correct_trials=5,
                                                         num_perf_trials=100, measure_performance=True,
                                                         build_dir=build_dir, device=device)
                row["returned_none"] = result is None
                if result is not None:
                    row.update(compiled=result.compiled, correctness=result.correctness, runtime=result.runtime,
                               metadata={k: str(v)[:600] for k, v in result.metadata.items()})
                    if result.correctness:
                        row["ref_runtime"] = _reference_ms(kb_eval, torch, ref, device)
                        if row["ref_runtime"] and result.runtime and result.runtime > 0:
                            row["speedup"] = row["ref_runtime"] / result.runtime
        except Exception as exc:  # noqa: BLE001 - the harness's own outcome for this task
            row.update(error=f"{type(exc).__name__}: {str(exc)[:1500]}")
        _restore(torch, defaults)
        row["seconds"] = round(time.perf_counter() - start, 3)
        print(json.dumps(row), flush=True)


def _reference_ms(kb_eval, torch, ref: str, device) -> float | None:
    """The reference timed as KernelBench's baseline script does: same seed, same timer, 100 trials."""
    context: dict = {}
    Model, get_init_inputs, get_inputs = kb_eval.load_original_model_and_inputs(ref, context)
    kb_eval.set_seed(42)
    init = [x.cuda(device=device) if isinstance(x, torch.Tensor) else x for x in get_init_inputs()]
    with torch.no_grad():
        kb_eval.set_seed(42)
        model = Model(*init).cuda(device=device)
        kb_eval.set_seed(42)
        inputs = [x.cuda(device=device) if isinstance(x, torch.Tensor) else x for x in get_inputs()]
        times = kb_eval.time_execution_with_cuda_event(model, *inputs, num_trials=100, verbose=False, device=device)
    return kb_eval.get_timing_stats(times, device=device)["mean"]


def _run_chunk(args, keys: list[str], out: Path, log) -> None:
    """Feed `keys` to one serving process; a crash or hang is recorded for the task in flight, then a fresh process
    continues with the rest."""
    pending = list(keys)
    while pending:
        cmd = [sys.executable, __file__, "--serve", "--phase", args.phase, "--kernelbench", args.kernelbench,
               "--corpus", args.corpus, "--builds", args.builds]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                start_new_session=True)
        for key in pending:
            proc.stdin.write(key + "\n")
        proc.stdin.close()
        finished = []
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + args.timeout
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                os.killpg(proc.pid, 9)  # a hang: the task in flight gets the blame
                proc.wait()
                break
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                break
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            finished.append(row["key"])
            deadline = time.monotonic() + args.timeout
        pending = [k for k in pending if k not in finished]
        if pending:  # the first unfinished one crashed or hung
            key = pending.pop(0)
            why = "timeout" if proc.returncode in (-9, 137) else f"process exited with {proc.returncode}"
            with out.open("a") as f:
                f.write(json.dumps({"key": key, "phase": args.phase, "crashed": why}) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernelbench", required=True, help="KernelBench's src folder (holds eval.py)")
    p.add_argument("--corpus", required=True)
    p.add_argument("--out", default="kb_harness.jsonl")
    p.add_argument("--builds", default="/tmp/kb_builds")
    p.add_argument("--phase", choices=["build", "eval"], default="eval")
    p.add_argument("--jobs", type=int, default=1, help="parallel processes (for eval, more than 1 shares the GPU: "
                   "the verdicts hold, the timings do not)")
    p.add_argument("--per-process", type=int, default=10, help="tasks a process evaluates before a fresh one")
    p.add_argument("--timeout", type=float, default=300, help="seconds a task may take")
    p.add_argument("--level", default=None)
    p.add_argument("--deadline", type=float, default=None, help="stop starting tasks after this many seconds")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args)
        return
    out = Path(args.out)
    done = _done(out, args.phase)
    levels = set(args.level.split(",")) if args.level else None
    keys = [_key(e) for e in _entries(Path(args.corpus), levels) if _key(e) not in done]
    if args.phase == "build":  # only load_inline kernels need a build
        keys = [k for k in keys if "load_inline" in (Path(args.corpus) / next(
            e["kernel"] for e in _entries(Path(args.corpus), None) if _key(e) == k)).read_text()]
    jobs = args.jobs
    lanes = [keys[i::jobs] for i in range(jobs)]  # each lane: one process at a time, a fresh one every so often
    start = time.monotonic()
    print(f"{args.phase}: {len(keys)} tasks ({len(done)} done before), {jobs} process(es)"
          + (" sharing the GPU: verdicts hold, timings are under load" if args.phase == "eval" and jobs > 1 else ""),
          flush=True)
    with open(out.with_suffix(".log"), "a") as log, ThreadPoolExecutor(max_workers=jobs) as pool:
        def run(lane):
            for i in range(0, len(lane), args.per_process):
                if args.deadline is not None and time.monotonic() - start > args.deadline:
                    return
                _run_chunk(args, lane[i:i + args.per_process], out, log)

        list(pool.map(run, lanes))
    rows = [r for r in map(json.loads, out.read_text().splitlines()) if r.get("phase") == args.phase] \
        if out.exists() else []
    print(f"{args.phase}: {len(rows)} rows in {out} after {time.monotonic() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
