"""Running reviews in separate worker processes, with a time limit per stage, each process in the sandbox of
`confine` (allowlisted environment, no network, Landlock, a PID namespace, not root).

Workers are forked by the zygote of their environment (zygote.py), which has imported torch once, so a fresh worker
is ready in a tenth of a second. The judge's runners serve one review each and are killed after it; a caller that
reviews again (an evaluator on a GPU) keeps spare workers (`WorkerPool.spares`) so even that fork and the CUDA
context are made beside the review in flight. Prebuilds and compile warm-ups may reuse a worker. Requests go to a
worker as JSON lines on stdin; it reports stage announcements and results as JSON lines on a pipe of its own (both
typed in `wire`), which the judge treats as hints. Its stdout and stderr (the candidate's prints, compiler output,
tracebacks) are a pipe this process drains into each review's own log as it arrives, capped (`LogSink`).

A worker is used again only after a review that ended cleanly (correct, wrong output, a compile or Python error)
and that left the harness intact. After a crash, a hang, a rejected candidate or anything unexpected it is killed
and the next review gets a fresh one. A hang is ended by killing the worker's whole process tree when its current
stage runs out of time; a crash (signal, abort, CUDA context loss) is seen as the pipe closing mid-review.

Each worker runs in a scratch folder of its own, removed with it.
"""

from __future__ import annotations

import atexit
import os
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.review import confine
from kernelskill.review.caches import OWNER_VAR
from kernelskill.review.logs import LogSink
from kernelskill.review.processes import descendants, describe_exit, kill_tree  # noqa: F401  (the sandbox's API)
from kernelskill.review.pinning import pinned
from kernelskill.review.quiet import BUILDS
from kernelskill.review.turns import Kind, Turn
from kernelskill.review.confined import run_confined, zygote_for  # noqa: F401  (the sandbox's API)
from kernelskill.review.zygote import RESULT_FD, ZygoteError
from kernelskill.review.wire import (AwaitingMessage, Command, CommandDone, DoneMessage, ReadyMessage, ReviewRequest,
                                     StageMessage, StageResults, StageSecondsMessage, UpdateMessage, VerdictMessage,
                                     decode)
from kernelskill.review.confine import SECRET_NAME  # noqa: F401  (names that never reach candidate code)

# Verdicts after which a worker may serve another review: the candidate ran (or failed to build) as ordinary code.
# After a crash, a timeout, a rejection (a candidate that tried to cheat) or a harness error it is replaced.
REUSABLE_AFTER = {None, "mismatch", "compile_error", "runtime_error", "bad_candidate"}
STAGES = ("load", "compile", "verify", "time")  # the order a worker announces them in
# the step each stage takes on a shared device (turns.py): loading and building are the host's work, run without a
# step (a runner between steps is stopped while another review's timed step runs); verify's trials run beside
# other reviews' untimed steps; the timing stage has the device alone
STAGE_TURNS: dict[str, Kind | None] = {"load": None, "compile": None, "verify": "plain", "time": "timed"}
MAX_MESSAGE = 64 << 20  # the longest line a worker's message may take
MAX_REVIEWS_PER_WORKER = 100  # a fresh process now and then bounds whatever slowly leaks
MAX_IDLE_WORKERS = 4  # idle workers kept across all environments (each holds a CUDA context on its GPU)
OWNER_SPARE_SECONDS = 1800  # a spare started for one candidate's review (`warm`) that never came is stopped
IDLE_SECONDS = 120  # an idle worker or spare of another environment unused this long is stopped (its phase is over)


def clean_environment(extra: dict[str, str] | None = None, interpret: bool = False, sandbox=None,
                      reference: bool = False, owner: str | None = None) -> dict[str, str]:
    """A worker's environment: allowlisted, with the sandbox's spec (`sandbox`: the settings' Sandbox, default from
    KERNELSKILL_SANDBOX). The worker imports this very package, also when it runs from a source checkout.
    `reference`: a reference runner's (caches no candidate's runner can reach); `owner`: a candidate's runner
    (caches.owner_key of its source: caches no other source's runner can reach)."""
    if sandbox is None:
        from kernelskill.settings import Sandbox

        sandbox = Sandbox.from_env()
    return confine.environment(extra, interpret, sandbox, reference=reference, owner=owner)


@dataclass
class WorkerOutcome:
    """What one review's worker reported, and how it ended."""

    results: StageResults = field(default_factory=StageResults)  # its updates, folded
    verdict: VerdictMessage | None = None  # set when the review failed in the worker
    done: DoneMessage | None = None  # its final message for this review
    finished: bool = False  # the worker sent its final message for this review
    stage: str | None = None  # the last stage it announced
    timed_out: bool = False
    returncode: int | None = None  # set when the worker is gone
    stage_seconds: dict[str, float] = field(default_factory=dict)
    sandbox: dict[str, dict] = field(default_factory=dict)  # layer -> its state in the worker (confine.apply)
    reused: bool = False  # served by a worker that had served before
    awaiting: bool = False  # its stages are over and it waits for the judge's commands (the caller holds it)
    worker: "WorkerProcess | None" = None  # the worker, when awaiting: the caller kills it when done with it
    pins_refused: list[str] = field(default_factory=list)  # its threads that could not be put on the timing CPU


class WorkerProcess:
    """One worker process: its pipes, its log and the reviews it has served. Forked by the zygote of its environment
    (zygote.py) into a PID namespace of its own."""

    def __init__(self, env: dict[str, str], device: str, log_path: Path | None) -> None:
        """`log_path` None: a spare, started before any review asks for it; what it prints starting up waits in its
        output pipe and opens its first review's log."""
        self.device = device
        self.env, self.scratch = confine.scratch_environment(env)
        confine.protect_harness(env)
        self.buffer = b""
        self.closed = False  # its result pipe closed: it died, or is dying
        self.served = 0
        self.sandbox: dict[str, dict] = {}
        self.turn: Turn | None = None  # the review's turn on a shared device, while it serves one (turns.py)
        self.log = LogSink(log_path)
        stdin_r, stdin_w = os.pipe()
        self.read_fd, write_fd = os.pipe()
        self.output_fd, output_w = os.pipe()
        os.set_blocking(self.output_fd, False)
        try:
            self.proc = zygote_for(env, reserve=True).spawn("kernelskill.review.worker", [RESULT_FD, "0", device],
                                                            self.env, str(self.scratch), stdin_r, output_w, write_fd)
        except BaseException:
            for fd in (stdin_w, self.read_fd, self.output_fd):
                os.close(fd)
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        finally:
            for fd in (stdin_r, write_fd, output_w):
                os.close(fd)
        self.proc.stdin = os.fdopen(stdin_w, "wb")
        self.started = self.last_used = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, request: ReviewRequest) -> bool:
        try:
            self.proc.stdin.write(request.model_dump_json().encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def kill(self, keep_scratch: bool = False) -> int | None:
        """Kill the worker and everything it started; its scratch folder goes too unless `keep_scratch` (the judge
        still reads files there: it removes the folder itself)."""
        if self.turn is not None:  # no other review's timed step stops this pid again (it is soon another's)
            self.turn.discard(self.proc.pid)
        if self.proc.returncode is not None and not keep_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            return self.proc.returncode
        if self.closed:  # it closed its pipe: it is ending on its own, and how it ended (a signal) is worth waiting for
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:  # never after: the zygote reaps its children, and a pid is soon another's
            kill_tree(self.proc.pid, wait=30)  # every process of it ended: what it held is the device's again
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        self._drain()  # what it wrote before it died
        self.log.close()
        for close in (self.proc.stdin.close, lambda: os.close(self.read_fd), lambda: os.close(self.output_fd)):
            try:
                close()
            except OSError:
                pass
        if not keep_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return code

    def serve(self, request: ReviewRequest, timeouts: dict[str, float], log_path: Path,
              progress: Callable[[str], None] | None = None, turn: Turn | None = None,
              cpu: int | None = None) -> WorkerOutcome:
        """Send one review and collect its messages until the worker says it is done or waits for commands, dies, or
        runs out of time.

        The time limits are this side's: each stage's clock starts when the worker first announces the stage, stages
        only move forward (announcing a stage again, or an earlier one, restarts nothing), and the whole review is
        held to the sum of the stage limits however the worker announces them. Under a `turn` (a shared device,
        turns.py) the worker waits before each stage for its `go`, sent when the stage's turn comes (the
        `time` stage alone on the device, the others beside other reviews' plain steps); the clocks stand still
        while the worker waits for its turn or is stopped for another review's timed step. With a `cpu`, the worker
        waits for its `go` too, and its `time` stage runs on that CPU (pinning.py)."""
        outcome = WorkerOutcome()
        self.turn = turn
        if turn is not None:
            turn.add(self.proc.pid)
        if turn is not None or cpu is not None:
            request = request.model_copy(update={"gated": True})
        clock = self._clock(turn)
        # a worker started for this review: its start-up is the review's, and counts against the load stage's limit;
        # a spare's start-up before the review asked for it is not
        began = self.started if self.served == 0 and not self.spare else clock()
        self._drain()
        self.log.switch(log_path)
        stage_deadline = began + timeouts["load"]
        total_deadline = began + sum(timeouts[name] for name in STAGES)
        reached = -1  # the furthest stage announced
        self.served += 1
        outcome.sandbox = self.sandbox
        if not self.send(request):
            outcome.returncode = self.kill()
            return outcome
        with ExitStack() as pins:  # the time stage's CPU, given back when the stages are over
            while not (outcome.finished or outcome.awaiting):
                remaining = min(stage_deadline, total_deadline) - clock()
                if remaining <= 0:
                    outcome.timed_out = True
                    outcome.stage = outcome.stage or "load"
                    break
                messages = self._read(min(remaining, 0.5))
                if messages is None:
                    break  # the worker died mid-review
                for message in messages:
                    if isinstance(message, ReadyMessage):
                        outcome.stage_seconds["start"] = round(clock() - began, 3)
                        self.sandbox = outcome.sandbox = message.sandbox
                    elif isinstance(message, StageMessage):
                        index = STAGES.index(message.stage)
                        if index > reached:
                            reached, outcome.stage = index, message.stage
                            if turn is not None:
                                turn.end()
                                if STAGE_TURNS[message.stage] is not None:
                                    total_deadline += turn.begin(STAGE_TURNS[message.stage])
                            if message.stage == "time":
                                outcome.pins_refused = pins.enter_context(pinned(self.pid, cpu)).refused
                            if request.gated:
                                self._send_line(Command(name="go").model_dump_json())
                            stage_deadline = clock() + timeouts[message.stage]
                            if progress is not None:
                                progress(message.stage)
                    elif isinstance(message, UpdateMessage):
                        outcome.results = outcome.results.merged(message.data)
                    elif isinstance(message, StageSecondsMessage):
                        outcome.stage_seconds[message.stage] = message.seconds
                    elif isinstance(message, VerdictMessage):
                        outcome.verdict = message
                    elif isinstance(message, AwaitingMessage):
                        outcome.awaiting = True
                        break
                    elif isinstance(message, DoneMessage):
                        outcome.done, outcome.finished = message, True
        if turn is not None:
            turn.end()  # its stages are over: the judge's commands take steps of their own
        self._drain()
        return outcome

    def _clock(self, turn: Turn | None) -> Callable[[], float]:
        """time.monotonic, less the time this worker's review was stopped for other reviews' timed steps."""
        if turn is None:
            return time.monotonic
        mark = turn.paused()
        return lambda: time.monotonic() - (turn.paused() - mark)

    def _send_line(self, line: str) -> bool:
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    @property
    def spare(self) -> bool:
        return self.log.path is None and self.served == 0

    def _drain(self) -> None:
        """Move what the worker printed so far into the current review's log (capped there)."""
        while True:
            try:
                chunk = os.read(self.output_fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                return
            if self.log.path is None:  # a spare's start-up output: it waits in the pipe for its first review
                self.log.pending += chunk
            else:
                self.log.write(chunk)

    def _read(self, timeout: float) -> list | None:
        """The whole messages that arrived within `timeout` (an empty list: none yet); None when the pipe closed.
        The worker's output is drained meanwhile, so a worker that prints a lot never blocks on a full pipe."""
        ready, _, _ = select.select([self.read_fd, self.output_fd], [], [], timeout)
        if self.output_fd in ready:
            self._drain()
        if self.read_fd not in ready:
            return []
        chunk = os.read(self.read_fd, 1 << 16)
        if not chunk:
            self.closed = True
            return None
        self.buffer += chunk
        if len(self.buffer) > MAX_MESSAGE:  # a line this long is no message of ours: the worker is not believed
            return None
        *lines, self.buffer = self.buffer.split(b"\n")
        return [m for m in (decode(line) for line in lines) if m is not None]

    def command(self, command: Command, limit: float) -> tuple[CommandDone | None, float]:
        """Send one judge command to a worker that waits for them; (its answer, None when it died or ran past
        `limit`; the wall seconds from sending it to the answer, by this process's clock)."""
        start = time.perf_counter()
        if not self._send_line(command.model_dump_json()):
            return None, 0.0
        if command.name == "end":
            return None, 0.0
        clock = self._clock(self.turn)
        deadline = clock() + limit
        while (remaining := deadline - clock()) > 0:
            messages = self._read(min(remaining, 0.5))
            if messages is None:
                return None, time.perf_counter() - start
            for message in messages:
                if isinstance(message, CommandDone) and message.name == command.name:
                    return message, time.perf_counter() - start
        return None, time.perf_counter() - start


class WorkerPool:
    """Idle workers by environment (the GPU they see, the interpreter switch): a review takes one or starts one.

    With `spares` above 0, each review (with reuse on) also tops up that many spare workers for its environment:
    started, never used, taken when no warm worker is idle. Start-up then runs beside the review in flight instead of
    inside the next one, which matters when reviews wait in line for one GPU and most of them retire their worker
    (every `--baseline compile` review does, for torch.compile's changes to the process). A spare's CUDA context is made while another review may be timing on the
    same GPU: one context's creation, seconds before that review's samples end, which the timing's spread reports
    like any other disturbance."""

    def __init__(self) -> None:
        self._idle: list[tuple[tuple, WorkerProcess]] = []  # oldest first
        self._spare: dict[tuple, list[WorkerProcess]] = {}  # started ahead, oldest first
        self.spares = 0  # spare workers kept per environment (set by an evaluator that will review again)
        self._lock = threading.Lock()

    def run(self, request: ReviewRequest, timeouts: dict[str, float], log_path: Path, env: dict[str, str],
            reuse: bool = True, progress: Callable[[str], None] | None = None,
            turn: Turn | None = None, cpu: int | None = None) -> WorkerOutcome:
        # a compile warm-up's worker serves only warm-ups: it keeps torch.compile's changes (worker/session.py)
        key = (request.device, request.mode == "warm", tuple(sorted(env.items())))
        self._expire(key)
        log_path.write_bytes(b"")  # this review's log, fresh
        # a judged runner serves one review and is killed after it: only a spare (never a used worker) is taken
        worker = self._take(key, spare_only=request.judged) if reuse else None
        if worker is None:
            try:
                worker = WorkerProcess(env, request.device, log_path)
            except ZygoteError as exc:
                log_path.write_text(f"[kernelskill] {exc}\n")
                return WorkerOutcome(returncode=None, verdict=VerdictMessage(
                    stage="load", kind="crash", error=f"the review worker could not start: {exc}"))
        if reuse and OWNER_VAR not in env:  # a candidate's own environment never comes again: see `warm`
            self._top_up(key, env, request.device)
        building = request.mode == "build"  # a prebuild: held still while a judge measures (quiet.py)
        if building:
            BUILDS.add(worker.pid)
        try:
            outcome = worker.serve(request.model_copy(update={"log_path": str(log_path)}), timeouts, log_path,
                                   progress, turn, cpu)
        finally:
            if building:
                BUILDS.discard(worker.pid)
        if outcome.awaiting:
            outcome.worker = worker
            return outcome
        done, verdict = outcome.done, outcome.verdict
        outcome.reused = worker.served > 1
        keep = (reuse and not request.judged and outcome.finished and done is not None and done.reusable and worker.alive()
                and (verdict.kind if verdict else None) in REUSABLE_AFTER and worker.served < MAX_REVIEWS_PER_WORKER
                # a warm-up worker only after a compile that worked: one whose compile pool broke (seen on the
                # H200: "Could not find an active GPU backend" in Inductor's subprocess) would fail every later one
                and (request.mode != "warm" or verdict is None))
        if keep:
            if worker.turn is not None:  # its review is over: no other review's timed step stops it now
                worker.turn.discard(worker.pid)
                worker.turn = None
            worker.last_used = time.monotonic()
            self._put(key, worker)
        else:
            outcome.returncode = worker.kill()
            if done is not None and done.unfit:  # say in the review's log why its worker was not used again
                with open(log_path, "a") as log:
                    log.write(f"[kernelskill] worker {worker.pid} retired: {'; '.join(done.unfit)}\n")
        return outcome

    def _take(self, key: tuple, spare_only: bool = False) -> WorkerProcess | None:
        """A warm idle worker of this environment, else its oldest spare; None: start one."""
        with self._lock:
            for i, (k, w) in enumerate([] if spare_only else self._idle):
                if k == key:
                    del self._idle[i]
                    if w.alive():
                        return w
                    w.kill()
                    return None
            spares = self._spare.get(key, [])
            while spares:
                w = spares.pop(0)
                if w.alive():
                    return w
                w.kill()  # a spare that died (a spare whose start-up failed lives, and tells its first review why)
        return None

    def _expire(self, current: tuple) -> None:
        """Stop the idle workers and spares of other environments that waited IDLE_SECONDS: the phase that used
        them (the compile warm-up before a bench's reviews) is over, and each holds memory and a CUDA context.
        Those of `current`, the environment asked for now, stay however long they waited (an LLM's turn)."""
        now = time.monotonic()
        with self._lock:
            stale = [w for k, w in self._idle if k != current and now - w.last_used > IDLE_SECONDS]
            self._idle = [(k, w) for k, w in self._idle if w not in stale]
            for key, workers in list(self._spare.items()):
                if key != current:  # one candidate's spare waits for its review, however long the line is
                    limit = OWNER_SPARE_SECONDS if any(n == OWNER_VAR for n, _ in key[2]) else IDLE_SECONDS
                    stale += [w for w in workers if now - w.last_used > limit]
                    self._spare[key] = [w for w in workers if w not in stale]
        for w in stale:
            w.kill()

    def warm(self, env: dict[str, str], device: str) -> bool:
        """Start a spare for one candidate's runner (an environment with OWNER_VAR: its caches are its own, so no
        other review can take it), for a review that will ask for it soon; at most `spares` such spares at once.
        Returns whether one was started."""
        key = (device, False, tuple(sorted(env.items())))
        with self._lock:
            waiting = sum(len(ws) for k, ws in self._spare.items() if any(n == OWNER_VAR for n, _ in k[2]))
            if self._spare.get(key) or waiting >= self.spares:
                return False
            self._spare.setdefault(key, []).append(WorkerProcess(env, device, None))
        return True

    def _top_up(self, key: tuple, env: dict[str, str], device: str) -> None:
        # under the lock, so reviews of one environment running at once (warm-ups) start no more than `spares`;
        # a start is a fork and an exec, the worker's own start-up runs after the lock is released
        with self._lock:
            spares = self._spare.setdefault(key, [])
            while len(spares) < self.spares:
                spares.append(WorkerProcess(env, device, None))

    def spare_pids(self) -> list[int]:
        with self._lock:
            return [w.pid for workers in self._spare.values() for w in workers]

    def _put(self, key: tuple, worker: WorkerProcess) -> None:
        with self._lock:
            self._idle.append((key, worker))
            evicted = self._idle[:-MAX_IDLE_WORKERS] if len(self._idle) > MAX_IDLE_WORKERS else []
            self._idle = self._idle[len(evicted):]
        for _, w in evicted:
            w.kill()

    def idle_pids(self) -> list[int]:
        with self._lock:
            return [w.pid for _, w in self._idle]

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            spare, self._spare = [w for workers in self._spare.values() for w in workers], {}
        for w in [*(w for _, w in idle), *spare]:
            w.kill()


# PR_SET_PDEATHSIG (armed by the worker) fires when the *thread* that started the worker ends, not the process. A
# pooled worker outlives the review (and the thread) that started it, so every worker is started from this one
# long-lived thread; the worker then dies with this process and never with a finished task's thread.
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelskill-spawn")


def _spawn(args: list[str], **kwargs) -> subprocess.Popen:
    return _spawner.submit(subprocess.Popen, args, **kwargs).result()


POOL = WorkerPool()
atexit.register(POOL.close)



def run_worker(request: ReviewRequest, timeouts: dict[str, float], log_path: Path, env: dict[str, str],
               reuse: bool = True, progress: Callable[[str], None] | None = None,
               turn: Turn | None = None, cpu: int | None = None) -> WorkerOutcome:
    """One review's worker, run through its stages (`cpu`: the CPU its `time` stage runs on, pinning.py)."""
    return POOL.run(request, timeouts, log_path, env, reuse=reuse, progress=progress, turn=turn, cpu=cpu)
