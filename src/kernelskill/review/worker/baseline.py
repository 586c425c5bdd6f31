"""The compile baseline: torch.compile(Model), built and called once before anything is timed.

Its first call is where Inductor compiles (tens of seconds on a GPU machine) or loads the graphs from its cache. Made
inside the timed loop's warm-up, those seconds counted as the cost of a warm-up call and cut every side's samples to
the minimum; made here, they are reported on their own (`timing.compile_warmup`). The same function serves a warm-up
(`mode="warm"`), which only fills Inductor's cache for a later review.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kernelskill.review.results import CompileWarmup

if TYPE_CHECKING:
    from kernelskill.review.worker.stages import Worker

CACHE_COUNTERS = ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")


def _counters() -> dict[str, int] | None:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return {name: int(counters["inductor"][name]) for name in CACHE_COUNTERS}


# lines of an exception's text that are not about the failure: Dynamo's advice on logging, a traceback's frames
ADVICE = ("Set TORCHDYNAMO_VERBOSE", "For even more developer context", "Traceback (most recent call last)", "File ")


def compile_error(exc: BaseException) -> str:
    """An Inductor failure in one line: what failed and, where Inductor wraps another error (a compile
    subprocess's), the error at the root, without Dynamo's advice on logging. The whole traceback is in the log."""
    lines = [line.strip() for line in f"{type(exc).__name__}: {exc}".splitlines()]
    lines = [line for line in lines if line and not line.startswith(ADVICE)]
    root = [line for line in lines[1:] if re.match(r"[\w.]+(Error|Exception): ", line)]
    text = lines[0] + (f" ... {root[-1]}" if root and root[-1] != lines[0] else "")
    return text[:400]


def subprocess_failed(exc: BaseException) -> bool:
    """Whether a compile failed in Inductor's compile subprocess rather than on the model: the graph was built and
    only the pool that compiles its kernels broke. On the H200 (torch 2.11, Triton 3.6) Triton's GPU detection fails
    in those forked workers ("Could not find an active GPU backend", triton-lang/triton#9578); a third of level 3's
    warm-ups failed so, fresh workers included."""
    return "SubprocException" in f"{type(exc).__name__}: {exc}"


def compile_in_process(exc: BaseException, who: str) -> str:
    """After a torch.compile that failed in Inductor's compile subprocess (subprocess_failed): the traceback into the
    log, Inductor set to compile its kernels in this process from now on (`compile_threads = 1`: the same kernels,
    compiled one after another) and Dynamo reset, so the next call compiles afresh. `who` names the compile in the
    log line. Returns the failure in one line."""
    import traceback

    import torch._dynamo
    import torch._inductor.config

    traceback.print_exc()
    said = compile_error(exc)
    print(f"[kernelskill] {who}: Inductor's compile subprocess failed ({said}); compiling its kernels in this "
          f"process instead (torch._inductor.config.compile_threads = 1). {user_tasks()}", flush=True)
    torch._inductor.config.compile_threads = 1
    torch._dynamo.reset()
    return said


def user_tasks() -> str:
    """This user's processes and threads against its limit, for the log of a failed compile subprocess: the sandbox
    runs every worker, and every Inductor compile worker they fork, as one user, and a thread that cannot be made is
    one way a forked worker's CUDA initialization (and with it Triton's GPU detection) could fail. On the H200 it was
    not: level 3's failures came at 25-202 processes and 182-710 threads against a limit of 515,423
    (docs/h200/kernelbench/compile); the line stays as the evidence for the next failure."""
    import os
    import resource
    from pathlib import Path

    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    limit = lambda n: "unlimited" if n == resource.RLIM_INFINITY else str(n)  # noqa: E731
    uid, procs, threads = os.getuid(), 0, 0
    try:
        pids = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    except OSError:  # no /proc to read: the limit alone
        return f"uid {uid}: RLIMIT_NPROC {limit(soft)} (hard {limit(hard)})"
    for pid in pids:
        try:
            status = dict(line.split(":", 1) for line in (pid / "status").read_text().splitlines() if ":" in line)
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if status.get("Uid", "").split()[:1] == [str(uid)]:
            procs += 1
            threads += int(status.get("Threads", "1").strip())
    return f"uid {uid}: {procs} processes, {threads} threads; RLIMIT_NPROC {limit(soft)} (hard {limit(hard)})"


def compile_reference(w: Worker) -> tuple[Callable, CompileWarmup]:
    """torch.compile of the review's reference model, called once on the warm-up inputs (under no_grad, as every
    timed call is): (the compiled forward, what its first call took). A compile that failed in Inductor's compile
    subprocess is made again with the kernels compiled in this process (compile_in_process; the result says so).
    Raises what the compile raises."""
    before = _counters()
    start = time.perf_counter()
    fallback = None
    try:
        run = _compile_and_call(w)
    except Exception as exc:
        if not subprocess_failed(exc):
            raise
        fallback = compile_in_process(exc, "torch.compile(Model)")
        before = _counters()  # the graphs of the try that worked
        run = _compile_and_call(w)
    seconds = round(time.perf_counter() - start, 3)
    after = _counters()
    counts = {name: after[name] - before[name] for name in CACHE_COUNTERS} if before and after else {}
    return run, CompileWarmup(seconds=seconds, in_process_after=fallback, **counts)


def ready_baseline(w: Worker) -> tuple[Callable | None, CompileWarmup | None, str | None]:
    """torch.compile(Model) made ready before a timed loop (a first call's compile seconds counted as a warm-up
    call's cost would cut every side's samples to the minimum): (its forward, its first call, None), or, when it
    fails, (None, None, the failure in one line) with the traceback in the log. The review goes on either way."""
    try:
        run, warmed = compile_reference(w)
    except Exception as exc:  # noqa: BLE001 - the baseline is missing, said why
        import traceback

        traceback.print_exc()
        return None, None, compile_error(exc)
    print(f"[kernelskill] torch.compile(Model): first call {warmed.seconds:.1f} s, {warmed.cache_words()}", flush=True)
    return run, warmed, None


def headers_beside_the_cache() -> None:
    """Inductor's precompiled headers (CPU) in the folder of Inductor's cache that the sandbox gives every worker.
    Inductor keeps them under its default cache folder, in TMPDIR, whatever TORCHINDUCTOR_CACHE_DIR says; a sandboxed
    worker's TMPDIR is its own scratch folder, so each worker compiled them again before its first graph (8 of a cold
    15 s on 2 CPU cores, also where every kernel was in the cache). They are keyed by the preprocessed header, the
    flags and the compiler, as there."""
    import os

    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not folder:
        return
    import torch._inductor.codecache as codecache

    if hasattr(codecache, "_HEADER_DIR") and hasattr(codecache, "_HEADER_LOCK_DIR"):
        codecache._HEADER_DIR = os.path.join(folder, "precompiled_headers")
        codecache._HEADER_LOCK_DIR = os.path.join(codecache._HEADER_DIR, "locks")


def _compile_and_call(w: Worker) -> Callable:
    torch = w.torch
    headers_beside_the_cache()
    compiled = torch.compile(w.ref_model)

    def run(*args):
        with torch.no_grad():
            return compiled(*args)

    run(*w.copy_args(w.warm_inputs))
    if w.device.type == "cuda":
        torch.cuda.synchronize(w.device)
    return run


def warm(w: Worker) -> None:
    """A warm-up: load the problem as a review does and compile its reference into Inductor's cache; nothing is
    timed and no candidate runs."""
    w.load()
    w.log.stage("compile")
    try:
        _, info = compile_reference(w)
    except Exception as exc:  # noqa: BLE001 - the problem's model and Inductor: the whole traceback in the log
        import traceback

        traceback.print_exc()
        raise w.log.fail("runtime_error", f"torch.compile(Model) failed: {compile_error(exc)}")
    w.log.update(compile_warmup=info)
    w.log.end_stage()
    import torch._dynamo

    torch._dynamo.reset()  # the graph is in Inductor's cache; this process warms the next problem from scratch
