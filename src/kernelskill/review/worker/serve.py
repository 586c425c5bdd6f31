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


def _bind_to_parent(parent: int) -> None:
    """No core dumps, and die with the reviewer that started us (a killed reviewer leaves no hung worker behind).

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
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _log_to(path: str) -> None:
    """Point stdout and stderr (ours, the candidate's, compilers') at this review's log file."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _log_to_fd(fds) -> None:
    """Point stdout and stderr at the log file the parent sent over `fds` (the sandbox cannot open log folders)."""
    import socket

    _, received, _, _ = socket.recv_fds(fds, 1, 1)
    sys.stdout.flush()
    sys.stderr.flush()
    for fd in received[:1]:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    for fd in received:
        os.close(fd)


def serve(channel: Channel, session: Session, request: ReviewRequest, fds=None, sandbox: dict | None = None) -> None:
    """One review, start to end; always ends with a "done" message saying whether this process may serve again."""
    from kernelskill.review import confine

    if request.log_fd and fds is not None:
        _log_to_fd(fds)
    else:
        _log_to(request.log_path)
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


def commands(channel: Channel, worker: Worker) -> bool:
    """Serve the judge's commands (wire.Command, one JSON line each on stdin) until `end`; False when stdin closed
    first. A command that raises is answered with its error: the judge decides what that means."""
    from kernelskill.review.worker import judged
    from kernelskill.review.worker.session import Verdict

    channel.send(AwaitingMessage())
    role = "reference" if worker.req.mode == "reference" else "candidate"
    for line in sys.stdin:
        if not line.strip():
            continue
        command = Command.model_validate_json(line)
        if command.name == "end":
            return True
        try:
            if command.name == "time_reference":
                info = judged.time_reference(worker, command.seeds)
            elif command.name == "stateful":
                info = {"stateful": judged.stateful(worker, command.seeds[0])}
            else:
                info = judged.COMMANDS[command.name](worker, role, command.seeds, command.out_dir)
            channel.send(CommandDone(name=command.name, info=info))
        except Verdict as verdict:
            channel.send(CommandDone(name=command.name, error=verdict.message.error[:2000]))
        except BaseException as exc:  # noqa: BLE001 - reported to the judge, and in the log in full
            traceback.print_exc()
            channel.send(CommandDone(name=command.name, error=f"{type(exc).__name__}: {str(exc)[:2000]}"))
    return False


def main() -> None:
    import socket

    from kernelskill.review import confine

    sandbox = confine.apply()  # first, while this process is single-threaded (it drops root: before the next line)
    _bind_to_parent(int(sys.argv[2]))
    channel = Channel(int(sys.argv[1]))
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    fds = socket.socket(fileno=int(sys.argv[4])) if len(sys.argv) > 4 else None
    start = time.perf_counter()
    try:
        session = Session(device)
    except BaseException as exc:  # the first request gets the reason as its verdict
        traceback.print_exc()
        try:
            request = ReviewRequest.model_validate_json(sys.stdin.readline())
        except ValueError:  # no request (the parent is gone) or not one: nowhere to log to
            request = None
        if request is not None and request.log_fd and fds is not None:
            _log_to_fd(fds)
            traceback.print_exception(exc)
        elif request is not None and request.log_path:
            _log_to(request.log_path)
            traceback.print_exception(exc)
        channel.send(StageMessage(stage="load"))
        channel.send(VerdictMessage(stage="load", kind="crash",
                                    error=f"the review worker could not start: {type(exc).__name__}: {exc}"))
        channel.send(DoneMessage(reusable=False, unfit=["start-up failed"]))
        os._exit(0)
    channel.send(ReadyMessage(seconds=round(time.perf_counter() - start, 3), device_name=session.device_name,
                              capability=session.capability, sandbox=sandbox))
    for line in sys.stdin:  # the parent closes stdin (or dies) to end us
        if line.strip():
            serve(channel, session, ReviewRequest.model_validate_json(line), fds, sandbox)
    os._exit(0)  # skip interpreter teardown: a candidate's broken state must not turn a verdict into a crash
