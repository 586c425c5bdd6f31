"""What a worker process keeps across reviews (`Session`), and how a review talks to its parent: the `Channel` of
typed messages (review/wire.py), the `StageLog` that announces each stage, reports its results and makes verdicts.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from kernelskill.review.wire import (Command, Message, StageMessage, StageResults, StageSecondsMessage, UpdateMessage,
                                     VerdictMessage, encode)


class Verdict(Exception):
    """Ends the review with its verdict message."""

    def __init__(self, message: VerdictMessage) -> None:
        super().__init__(message.error)
        self.message = message


class Channel:
    def __init__(self, fd: int) -> None:
        self.stream = os.fdopen(fd, "w", buffering=1)

    def send(self, message: Message) -> None:
        self.stream.write(encode(message))
        self.stream.flush()


class StageLog:
    """The stage a review is in: announced before it starts (the parent's time limit per stage follows it), its
    seconds after it ends, its results as they come; a verdict names the stage it happened in."""

    def __init__(self, channel: Channel, gated: bool = False) -> None:
        self.channel = channel
        self.name = "load"
        self.started = time.perf_counter()
        self.gated = gated  # under turns: each stage starts on the harness's `go` (review/turns.py)

    def stage(self, name: str) -> None:
        self.name = name
        self.channel.send(StageMessage(stage=name))
        if self.gated:
            wait_for_go()
        self.started = time.perf_counter()


    def end_stage(self) -> None:
        self.channel.send(StageSecondsMessage(stage=self.name, seconds=round(time.perf_counter() - self.started, 3)))

    def update(self, **results) -> None:
        """Report results (fields of `wire.StageResults`); validated here, so a wrong field fails in the worker."""
        self.channel.send(UpdateMessage(data=StageResults(**results)))

    def fail(self, kind: str, error: str, **extra) -> Verdict:
        """The review's verdict, said in the log too, with the whole traceback of the exception being handled (the
        verdict's error keeps only the candidate's frames; the log is where a user or an agent reads the rest)."""
        exc = sys.exc_info()[1]
        print(f"[kernelskill] {self.name} stage: {kind}: {error}", file=sys.stderr, flush=True)
        if exc is not None:
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
            sys.stderr.flush()
        return Verdict(VerdictMessage(stage=self.name, kind=kind, error=error, **extra))

    def reject(self, check: str, detail: str) -> Verdict:
        return self.fail("rejected", f"rejected by check {check}: {detail}", checks=[{"name": check, "detail": detail}])


def wait_for_go() -> None:
    """Block until the harness says the announced stage may start; a closed stdin ends this process (its review
    is over), anything else on it is a harness bug."""
    line = sys.stdin.readline()
    if not line:
        os._exit(0)
    command = Command.model_validate_json(line)
    if command.name != "go":
        raise RuntimeError(f"a gated runner was sent `{command.name}` before its stage's `go`")


class Session:
    """What a worker process sets up once and every review shares: torch, the device, the guards' snapshots.

    The snapshots are taken before any candidate code runs in the process; after each review `fit()` says whether
    the process is still as it was (the same harness functions, no extra threads).
    """

    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        self.device_type = device
        if device == "cuda":
            if not torch.cuda.is_available():
                try:  # torch says why (no driver, an error from cuInit) only when asked to initialize
                    torch.cuda.init()
                    why = ""
                except Exception as exc:  # noqa: BLE001 - the reason goes into the message
                    why = f" ({type(exc).__name__}: {exc})"
                raise RuntimeError(f"no CUDA device is visible in the worker{why}")
            self.device = torch.device("cuda", 0)
            torch.cuda.set_device(self.device)
            self.device_name = torch.cuda.get_device_name(self.device)
            self.capability = "%d.%d" % torch.cuda.get_device_capability(self.device)
        else:
            self.device = torch.device("cpu")
            self.device_name, self.capability = "cpu", None
        import torch._dynamo  # noqa: F401  (it re-wraps torch.manual_seed on import: let that happen before the snapshot)

        from kernelskill.review.confine import hash_sources_from_memory

        hash_sources_from_memory()  # the sandbox keeps the problem and candidate files closed; their sources are here

        from kernelskill.review.cuda import inline
        from kernelskill.review.guards import Integrity, KernelTracker, ModuleSnapshot, backend_flags

        # CUDA extensions: on a GPU the content-addressed fast builder, on CPU a compile check (nothing can run)
        inline.install("check" if device == "cpu" else "run")
        self.tracker = KernelTracker()
        self.tracker.install()
        self.integrity = Integrity()  # before any candidate code runs
        self.snapshot = ModuleSnapshot()
        self.threads = set(threading.enumerate())
        self.backend_flags = backend_flags()  # cudnn.benchmark, TF32 ...: put back after every review
        self.unrestored: list[str] = []

    def fit(self) -> list[str]:
        """Why this process should not serve another review (empty: it may)."""
        problems = [f"replaced harness function {name}" for name in self.integrity.tampered()]
        changed = self.snapshot.changed()
        if changed:
            problems.append(f"{len(changed)} torch/stdlib attribute(s) replaced: {', '.join(changed[:8])}")
        left = [t.name for t in threading.enumerate() if t not in self.threads and t.is_alive()]
        if left:
            problems.append(f"threads left running: {left}")
        if self.unrestored:
            problems.append(f"global PyTorch settings could not be restored: {', '.join(self.unrestored)}")
        return problems

    def accept_state(self) -> None:
        """Take the process as it is now as its clean state. Only after a compile warm-up, where no candidate code
        ran: torch.compile's own changes (Dynamo re-wraps nn.Module.__init__, Inductor keeps a compile pool and
        tqdm's monitor running) then stay, and the worker serves the next warm-up instead of being replaced. The
        pool keeps such a worker apart from review workers (review/sandbox.py), so no review ever runs in it."""
        from kernelskill.review.guards import ModuleSnapshot

        self.snapshot = ModuleSnapshot()
        self.threads = set(threading.enumerate())

    def clean_up(self) -> None:
        """Drop one review's modules and memory so the next review starts from the same state."""
        import gc

        from kernelskill.review.guards import restore_backend_flags

        self.unrestored = restore_backend_flags(self.backend_flags)
        for name in ("kernelskill_candidate", "kernelskill_problem"):
            sys.modules.pop(name, None)
        gc.collect()
        if self.device_type == "cuda":
            self.torch.cuda.synchronize(self.device)
            self.torch.cuda.empty_cache()
