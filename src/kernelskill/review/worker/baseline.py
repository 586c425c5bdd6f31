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


def compile_reference(w: Worker) -> tuple[Callable, CompileWarmup]:
    """torch.compile of the review's reference model, called once on the warm-up inputs (under no_grad, as every
    timed call is): (the compiled forward, what its first call took). Raises what the compile raises."""
    torch = w.torch
    compiled = torch.compile(w.ref_model)

    def run(*args):
        with torch.no_grad():
            return compiled(*args)

    before = _counters()
    start = time.perf_counter()
    run(*w.copy_args(w.warm_inputs))
    if w.device.type == "cuda":
        torch.cuda.synchronize(w.device)
    seconds = round(time.perf_counter() - start, 3)
    after = _counters()
    counts = {name: after[name] - before[name] for name in CACHE_COUNTERS} if before and after else {}
    return run, CompileWarmup(seconds=seconds, **counts)


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
