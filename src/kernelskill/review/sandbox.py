"""Running reviews in separate worker processes, with a time limit per stage and an environment without secrets.

A worker (`kernelskill.review.worker`) is started once and then serves one review after another, so a review pays
for Python, torch and CUDA start-up only when it gets a fresh worker. Requests go to it as JSON lines on stdin; it
reports stage announcements and results as JSON lines on a pipe of its own. Its stdout and stderr (the candidate's
prints, compiler output, tracebacks) go to each review's own log file, which is kept.

A worker is used again only after a review that ended cleanly (correct, wrong output, a compile or Python error)
and that left the harness intact. After a crash, a hang, a rejected candidate or anything unexpected it is killed
and the next review gets a fresh one. A hang is ended by killing the worker's whole process group when its current
stage runs out of time; a crash (signal, abort, CUDA context loss) is seen as the pipe closing mid-review.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

# Variables whose names look like credentials never reach candidate code.
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE)", re.IGNORECASE)

# Verdicts after which a worker may serve another review: the candidate ran (or failed to build) as ordinary code.
# After a crash, a timeout, a rejection (a candidate that tried to cheat) or a harness error it is replaced.
REUSABLE_AFTER = {None, "mismatch", "compile_error", "runtime_error", "bad_candidate"}
MAX_REVIEWS_PER_WORKER = 100  # a fresh process now and then bounds whatever slowly leaks
MAX_IDLE_WORKERS = 4  # idle workers kept across all environments (each holds a CUDA context on its GPU)


def clean_environment(extra: dict[str, str] | None = None, interpret: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not SECRET_NAME.search(k)}
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    # the worker must import this very package, also when it runs from a source checkout
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


@dataclass
class WorkerOutcome:
    messages: list[dict] = field(default_factory=list)
    finished: bool = False  # the worker sent its final message for this review
    stage: str | None = None  # the last stage it announced
    timed_out: bool = False
    returncode: int | None = None  # set when the worker is gone
    stage_seconds: dict[str, float] = field(default_factory=dict)


class WorkerProcess:
    """One worker process: its pipes and the reviews it has served."""

    def __init__(self, env: dict[str, str], device: str, log_path: Path) -> None:
        self.env, self.device = env, device
        self.read_fd, write_fd = os.pipe()
        self.buffer = b""
        self.served = 0
        with open(log_path, "ab") as log:  # start-up output goes to the first review's log
            self.proc = _spawn(
                [sys.executable, "-m", "kernelskill.review.worker", str(write_fd), str(os.getpid()), device],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, pass_fds=(write_fd,),
                start_new_session=True,  # its own process group, so a hang is killed with all its children
            )
        os.close(write_fd)
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, request: dict) -> bool:
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def kill(self) -> int | None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        for close in (self.proc.stdin.close, lambda: os.close(self.read_fd)):
            try:
                close()
            except OSError:
                pass
        return code

    def serve(self, request: dict, timeouts: dict[str, float]) -> WorkerOutcome:
        """Send one review and collect its messages until the worker says it is done, dies, or runs out of time."""
        outcome = WorkerOutcome()
        # a fresh worker's start-up counts against the load stage's limit
        stage_started = self.started if self.served == 0 else time.monotonic()
        self.served += 1
        limit = timeouts["load"]
        if not self.send(request):
            outcome.returncode = self.kill()
            return outcome
        while not outcome.finished:
            remaining = stage_started + limit - time.monotonic()
            if remaining <= 0:
                outcome.timed_out = True
                break
            ready, _, _ = select.select([self.read_fd], [], [], min(remaining, 0.5))
            if not ready:
                continue
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                break  # the worker died mid-review
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            for line in lines:
                try:
                    message = json.loads(line)
                except json.JSONDecodeError:
                    continue
                kind = message.get("type")
                if kind == "ready":
                    outcome.stage_seconds["start"] = round(time.monotonic() - self.started, 3)
                    continue
                if kind == "stage":
                    outcome.stage = message["stage"]
                    stage_started, limit = time.monotonic(), timeouts[message["stage"]]
                elif kind == "stage_seconds":
                    outcome.stage_seconds[message["stage"]] = message["seconds"]
                elif kind == "done":
                    outcome.finished = True
                outcome.messages.append(message)
        return outcome


class WorkerPool:
    """Idle workers by environment (the GPU they see, the interpreter switch): a review takes one or starts one."""

    def __init__(self) -> None:
        self._idle: list[tuple[tuple, WorkerProcess]] = []  # oldest first
        self._lock = threading.Lock()

    def run(self, request: dict, timeouts: dict[str, float], log_path: Path, env: dict[str, str],
            reuse: bool = True) -> WorkerOutcome:
        key = (request["device"], tuple(sorted(env.items())))
        log_path.write_bytes(b"")  # this review's log, fresh
        worker = self._take(key) if reuse else None
        if worker is None:
            worker = WorkerProcess(env, request["device"], log_path)
        outcome = worker.serve({**request, "log_path": str(log_path)}, timeouts)
        done = next((m for m in outcome.messages if m.get("type") == "done"), {})
        verdict = next((m for m in outcome.messages if m.get("type") == "verdict"), {})
        keep = (reuse and outcome.finished and done.get("reusable") is True and worker.alive()
                and verdict.get("kind") in REUSABLE_AFTER and worker.served < MAX_REVIEWS_PER_WORKER)
        if keep:
            self._put(key, worker)
        else:
            outcome.returncode = worker.kill()
            if done.get("unfit"):  # say in the review's log why its worker was not used again
                with open(log_path, "a") as log:
                    log.write(f"[kernelskill] worker {worker.pid} retired: {'; '.join(done['unfit'])}\n")
        return outcome

    def _take(self, key: tuple) -> WorkerProcess | None:
        with self._lock:
            for i, (k, w) in enumerate(self._idle):
                if k == key:
                    del self._idle[i]
                    if w.alive():
                        return w
                    w.kill()
                    return None
        return None

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
        for _, w in idle:
            w.kill()


# PR_SET_PDEATHSIG (armed by the worker) fires when the *thread* that started the worker ends, not the process. A
# pooled worker outlives the review (and the thread) that started it, so every worker is started from this one
# long-lived thread; the worker then dies with this process and never with a finished task's thread.
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelskill-spawn")


def _spawn(args: list[str], **kwargs) -> subprocess.Popen:
    return _spawner.submit(subprocess.Popen, args, **kwargs).result()


POOL = WorkerPool()
atexit.register(POOL.close)


def run_worker(request: dict, timeouts: dict[str, float], log_path: Path, env: dict[str, str],
               reuse: bool = True) -> WorkerOutcome:
    return POOL.run(request, timeouts, log_path, env, reuse=reuse)


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "the worker did not exit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the worker process died with {name}"
    return f"the worker process exited with code {returncode} before reporting a result"
