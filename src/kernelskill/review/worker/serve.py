"""The worker process's life: confined first (`confine.apply`), bound to its parent, its `Session` set up once, then
one review after another read from stdin, each with its log file and ending in a `done` message."""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from kernelskill.review.wire import (AwaitingMessage, Command, CommandDone, DoneMessage, ReadyMessage, ReviewRequest,
                                     StageMessage, StageResults, StageSecondsMessage, UpdateMessage, VerdictMessage)
from kernelskill.review.worker.session import Channel, Session, Verdict
from kernelskill.review.worker.stages import Worker


def bind_to_parent(parent: int) -> None:
    """No core dumps, and die with the process that started us (a killed reviewer leaves no hung worker behind).
    `parent` 0: started by the zygote, whose chain of PR_SET_PDEATHSIG ends at the reviewer; nothing to compare.

    Done here rather than in a preexec_fn, which is unsafe when the parent runs threads (as a benchmark does).
    """
    import resource
    import signal

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux/glibc: the parent's own cleanup still kills the group
        return
    if parent and os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def serve(channel: Channel, session: Session, request: ReviewRequest, sandbox: dict | None = None) -> None:
    """One review, start to end; always ends with a "done" message saying whether this process may serve again.
    What it prints (and the candidate, and compilers) goes to stdout and stderr: a pipe the reviewer drains into
    the review's log, capped as it arrives."""
    from kernelskill.review import confine

    print(f"[kernelskill] sandbox: {confine.describe(sandbox or {})}", file=sys.stderr, flush=True)
    confine.remember_sources([(str(Path(request.problem_path)), request.problem_source)]
                             + ([] if request.source_unreadable else
                                [(request.candidate_path or "<candidate>", request.candidate_source)]))
    worker = Worker(request, channel, session)
    kind = None
    try:
        worker.run()
    except Verdict as verdict:
        kind = verdict.message.kind
        channel.send(verdict.message)
        channel.send(UpdateMessage(data=StageResults(flags=sorted(worker.flags))))  # what the stages flagged so far
    except BaseException as exc:  # a bug in the harness, or something the candidate broke in it: report, never hide
        kind = "crash"
        traceback.print_exc()
        channel.send(VerdictMessage(stage=worker.log.name, kind="crash",
                                    error=f"review worker error in stage {worker.log.name}: {type(exc).__name__}: {exc}"))
    if worker.inputs_s:
        channel.send(StageSecondsMessage(stage="inputs", seconds=round(worker.inputs_s, 3)))
    if request.judged and kind is None:
        if not commands(channel, worker):
            kind = "crash"
    unfit = ["the review ended in a crash"] if kind == "crash" else []
    try:
        del worker
        session.clean_up()
        if request.mode == "warm" and kind is None:
            session.accept_state()
        unfit += session.fit()
    except BaseException as exc:  # noqa: BLE001 - a process that cannot clean up is not used again
        unfit.append(f"clean-up failed: {type(exc).__name__}: {exc}")
    sys.stdout.flush()
    sys.stderr.flush()
    channel.send(DoneMessage(reusable=not unfit, unfit=unfit))


# The reference runner's commands after which it waits while the candidate's runner works: the blocks its
# allocator keeps cached are given back to the device first. A 4.3 GB-output problem's trials left tens of GB
# cached there, and an honest candidate ran out of memory beside it (CUDA-L1's L2/34 on the H100). Its batch's
# blocks are made again by `reserve`, after the candidate's runner is gone.
IDLE_AFTER = ("time_reference", "stateful", "outputs", "inputs")


def _release_cached_memory() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def commands(channel: Channel, worker: Worker) -> bool:
    """Serve the judge's commands (wire.Command, one JSON line each on stdin) until `end`; False when stdin closed
    first. A command that raises is answered with its error: the judge decides what that means."""
    from kernelskill.review.worker import judged
    from kernelskill.review.worker.session import Verdict

    role = "reference" if worker.req.mode == "reference" else "candidate"
    if role == "reference":
        _release_cached_memory()
    channel.send(AwaitingMessage())
    for line in sys.stdin:
        if not line.strip():
            continue
        command = Command.model_validate_json(line)
        if command.name == "end":
            return True
        try:
            if command.name == "baseline":
                info = judged.ready_compiled(worker)
            elif command.name == "time_reference":
                info = judged.time_reference(worker, command.seeds)
            elif command.name == "stateful":
                info = {"stateful": judged.stateful(worker, command.seeds[0])}
            elif command.name in ("reserve", "prepare"):
                graph = {"graph": command.graph} if command.name == "prepare" else {}
                info = judged.COMMANDS[command.name](worker, role, command.seeds, command.out_dir,
                                                     command.reserve_bytes, **graph)
            elif command.name in ("inputs", "calls"):
                info = judged.COMMANDS[command.name](worker, role, command.seeds, command.out_dir, command.key)
            else:
                info = judged.COMMANDS[command.name](worker, role, command.seeds, command.out_dir)
            if role == "reference" and command.name in IDLE_AFTER:
                _release_cached_memory()
            channel.send(CommandDone(name=command.name, info=info))
        except Verdict as verdict:
            channel.send(CommandDone(name=command.name, error=verdict.message.error[:2000]))
        except BaseException as exc:  # noqa: BLE001 - reported to the judge, and in the log in full
            traceback.print_exc()
            channel.send(CommandDone(name=command.name, error=f"{type(exc).__name__}: {str(exc)[:2000]}"))
    return False


def main() -> None:
    """`python -m kernelskill.review.worker RESULT_FD PARENT_PID DEVICE` (the zygote runs it as a module)."""
    from kernelskill.review import confine

    try:
        sandbox = confine.apply()  # first, while single-threaded (it drops root: before the next line)
    except confine.Unconfined as exc:  # fails closed: the first request gets the reason and the way out
        _refuse(int(sys.argv[1]), "sandbox", str(exc))
    bind_to_parent(int(sys.argv[2]))
    channel = Channel(int(sys.argv[1]))
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    start = time.perf_counter()
    try:
        session = Session(device)
    except BaseException as exc:  # the first request gets the reason as its verdict
        traceback.print_exc()
        _refuse(int(sys.argv[1]), "crash", f"the review worker could not start: {type(exc).__name__}: {exc}")
    channel.send(ReadyMessage(seconds=round(time.perf_counter() - start, 3), device_name=session.device_name,
                              capability=session.capability, sandbox=sandbox))
    for line in sys.stdin:  # the parent closes stdin (or dies) to end us
        if line.strip():
            serve(channel, session, ReviewRequest.model_validate_json(line), sandbox)
    os._exit(0)  # skip interpreter teardown: a candidate's broken state must not turn a verdict into a crash


def _refuse(fd: int, kind: str, error: str) -> None:
    """Answer the first request with a verdict of `kind` and end; no candidate code has run."""
    print(f"[kernelskill] {error}", file=sys.stderr, flush=True)
    channel = Channel(fd)
    sys.stdin.readline()  # the request (or nothing: the parent is gone)
    channel.send(StageMessage(stage="load"))
    channel.send(VerdictMessage(stage="load", kind=kind, error=error))
    channel.send(DoneMessage(reusable=False, unfit=["start-up failed"]))
    os._exit(0)
