"""Calling the candidate: its bare forward (what the timer measures), a checked call (the device synchronized,
asynchronous CUDA errors surfaced, no thread left behind), and the checks that follow a call. A failure becomes the
verdict it is: a CUDA error a crash, a Python exception a runtime error, a guard that fires a rejection.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback

from kernelskill.review.worker.session import Session, StageLog, Verdict
from kernelskill.settings import Guards


def short_traceback(exc: BaseException, filename: str) -> str:
    """The exception with only the frames from the candidate's file (the part its author can act on)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    lines = [f"  {f.filename}:{f.lineno} in {f.name}: {f.line}" for f in frames[-4:]]
    text = f"{type(exc).__name__}: {exc}".strip()
    return "\n".join(lines + [text])


def is_cuda_fatal(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return "AcceleratorError" in text or "CUDA error" in text or "illegal memory access" in text or "cudaError" in text


class CandidateCalls:
    """The candidate's ModelNew (set by the compile stage) and every call of it."""

    def __init__(self, session: Session, log: StageLog, guards: Guards, flags: set[str], filename: str) -> None:
        self.torch, self.device, self.integrity = session.torch, session.device, session.integrity
        self.log, self.guards, self.flags = log, guards, flags
        self.file = filename  # the candidate's file name, as its tracebacks show it
        self.model = None  # ModelNew(*get_init_inputs()), once compiled

    def call(self, args: list):
        """The candidate's forward and nothing else: what the timer measures (no synchronization, no checks)."""
        try:
            with self.torch.no_grad():
                return self.model(*args)
        except Verdict:
            raise
        except Exception as exc:
            if is_cuda_fatal(exc):
                raise self.log.fail("crash", f"CUDA error while running the candidate: {short_traceback(exc, self.file)}")
            raise self.log.fail("runtime_error", "the candidate raised while running:\n" + short_traceback(exc, self.file))

    def run(self, args: list):
        """A checked call: forward, wait for the device (surfacing asynchronous CUDA errors), no threads left."""
        threads = set(threading.enumerate())
        out = self.call(args)
        self.sync()
        self.check_threads(threads)
        return out

    def sync(self) -> None:
        if self.device.type == "cuda":
            try:
                self.torch.cuda.synchronize(self.device)
            except Exception as exc:
                raise self.log.fail("crash", f"CUDA error after the candidate ran: {type(exc).__name__}: {exc}")

    def check_integrity(self) -> None:
        if not self.guards.integrity:
            return
        tampered = self.integrity.tampered()
        if tampered:
            raise self.log.reject("runtime:integrity", "replaced harness functions: " + ", ".join(tampered))

    def check_threads(self, before: set) -> None:
        """Threads started by candidate code must not outlive the call that started them."""
        if not self.guards.no_threads:
            return
        library, new = [], []
        for t in threading.enumerate():
            if t not in before and t.is_alive():
                (library if _compile_worker_thread(t) else new).append(t.name)
        if library:  # torch.compile's and tqdm's own workers, started once per process: not the candidate's work
            self.flags.add(f"library_threads: {sorted(library)}")
        if new:
            raise self.log.reject("runtime:threads", f"the candidate left {len(new)} thread(s) running: {new}")


# Threads whose code lives in these packages are compiler infrastructure (torch.compile's compile workers and their
# progress bar's monitor), started by a candidate that calls torch.compile; they compute nothing of its output.
LIBRARY_THREAD_PACKAGES = ("torch._inductor", "torch._dynamo", "tqdm")  # CUDA-L1 L2/34: torch.compile


def _compile_worker_thread(thread) -> bool:
    """Whether a thread runs code from a file of LIBRARY_THREAD_PACKAGES (the code's file, not a `__module__` a
    candidate could set)."""
    import importlib.util

    fn = getattr(thread, "_target", None) if type(thread) is threading.Thread else type(thread).run
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return False
    for name in LIBRARY_THREAD_PACKAGES:
        spec = importlib.util.find_spec(name) if name.split(".")[0] in sys.modules else None
        folders = list(spec.submodule_search_locations or []) if spec else []
        if any(code.co_filename.startswith(os.path.join(folder, "")) for folder in folders):
            return True
    return False
