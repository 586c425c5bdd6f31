"""Running one review in a separate process, with a time limit per stage and an environment without secrets.

The worker (`kernelskill.review.worker`) reports stage announcements and results as JSON lines on a pipe of its
own; its stdout and stderr (the candidate's prints, compiler output, tracebacks) go to a log file that is kept.
A hang is ended by killing the worker's whole process group when its current stage runs out of time; a crash
(signal, abort, CUDA context loss) is seen as the pipe closing without a final message.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# Variables whose names look like credentials never reach candidate code.
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE)", re.IGNORECASE)


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
    finished: bool = False  # the worker sent its final message
    stage: str | None = None  # the last stage it announced
    timed_out: bool = False
    returncode: int | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)


def run_worker(request: dict, timeouts: dict[str, float], log_path: Path, env: dict[str, str]) -> WorkerOutcome:
    read_fd, write_fd = os.pipe()
    outcome = WorkerOutcome()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kernelskill.review.worker", str(write_fd), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(write_fd,),
            start_new_session=True,  # its own process group, so a hang is killed with all its children
        )
    os.close(write_fd)
    try:
        proc.stdin.write(json.dumps(request).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    buffer = b""
    stage_started = time.monotonic()
    limit = timeouts["load"]
    try:
        while True:
            remaining = stage_started + limit - time.monotonic()
            if remaining <= 0:
                outcome.timed_out = True
                break
            ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.5))
            if not ready:
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break  # the worker exited (normally after "done", or it died)
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    message = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if message.get("type") == "stage":
                    outcome.stage = message["stage"]
                    stage_started, limit = time.monotonic(), timeouts[message["stage"]]
                elif message.get("type") == "stage_seconds":
                    outcome.stage_seconds[message["stage"]] = message["seconds"]
                elif message.get("type") == "done":
                    outcome.finished = True
                outcome.messages.append(message)
    finally:
        os.close(read_fd)
        if outcome.timed_out or not outcome.finished:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            outcome.returncode = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            outcome.returncode = proc.wait()
    return outcome


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
