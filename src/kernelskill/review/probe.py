"""The problem probe: problem code never runs in the harness process, which holds the API keys.

    check_problem(problem)      # ProblemError when Model or get_inputs() cannot run: optimize and bench ask this
                                # before any model call
    probe(problem).work         # the problem's work (work.py), for the speed of light and `memory explain`

One child process per problem source (`python -m kernelskill.review.probe`), cached in this process by path and
source sha256, does both: it checks the problem (problem.build_and_draw: Model built and inputs drawn on the meta
device, else the CPU) and then counts its work. It is confined like a review worker: its environment is
sandbox.clean_environment() (allowlisted, nothing that looks like a secret), its working directory a fresh scratch
folder (removed afterwards), and `confine.apply()` is its first act. A sandbox layer that cannot be applied is
answered as such and raised here as `SandboxUnavailable`, a KernelSkillError: `optimize` and `bench` stop before
anything is asked of a model. The child has a time limit (its whole process group is killed at it), its output is
read up to OUTPUT_LIMIT bytes, and its answer is strict: JSON lines on the child's own stdout, each validated, while
whatever the problem prints goes to stderr. The problem's source reaches the child on stdin: inside the sandbox the
file itself may not be readable.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from kernelskill.errors import KernelSkillError, ProblemError
from kernelskill.problem import Problem
from kernelskill.review.work import SOURCE, ProblemWork

PROBE_TIMEOUT_S = 120.0  # importing torch, the check, and the work count (a CPU forward when meta cannot do it)
OUTPUT_LIMIT = 2 << 20  # bytes kept of each of the child's stdout and stderr; the rest is read and dropped
REQUEST_LIMIT = 64 << 20  # the problem's source, as the child reads it


class SandboxUnavailable(KernelSkillError):
    """The sandbox around problem code could not be set up: nothing of the problem ran."""


# ---- what passes between the harness and the child ----------------------------------------------------------------
class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProbeRequest(_Message):
    path: str
    source: str


class SandboxFailed(_Message):
    kind: Literal["sandbox"]
    error: str


class Checked(_Message):
    kind: Literal["checked"]
    error: str | None = None  # a ProblemError's text: the problem cannot run


class Counted(_Message):
    kind: Literal["counted"]
    work: ProblemWork


ANSWER = TypeAdapter(Annotated[SandboxFailed | Checked | Counted, Field(discriminator="kind")])


@dataclass(frozen=True)
class Probe:
    """What the probe found: `error` (the ProblemError text) when the problem cannot run, and its work."""

    error: str | None
    work: ProblemWork


# ---- the harness's side --------------------------------------------------------------------------------------------
def check_problem(problem: Problem, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise ProblemError, with the text the check gave, when the problem's Model or inputs cannot be built; a
    SandboxUnavailable when problem code could not be confined."""
    found = probe(problem, timeout_s)
    if found.error is not None:
        raise ProblemError(found.error)


_cache: dict[tuple[str, str, float], Probe] = {}
_locks: dict[tuple[str, str, float], threading.Lock] = {}
_cache_lock = threading.Lock()


def probe(problem: Problem, timeout_s: float = PROBE_TIMEOUT_S) -> Probe:
    """The probe of `problem`, run once per (path, source) in this process: bench's tasks, the evaluator's count
    ahead and each review's speed of light all ask, one child answers. A sandbox failure is raised, never kept."""
    # the path as a file, however it was named (optimize's check names it as typed, the speed of light resolved)
    key = (str(Path(problem.path).resolve()), hashlib.sha256(problem.source.encode()).hexdigest(), timeout_s)
    with _cache_lock:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:  # a second thread asking for the same problem waits for the first one's child
        if key not in _cache:
            _cache[key] = run_probe(problem, timeout_s)
        return _cache[key]


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def run_probe(problem: Problem, timeout_s: float = PROBE_TIMEOUT_S, python: str = sys.executable) -> Probe:
    """Run one probe child for `problem` (no cache)."""
    from kernelskill.review import confine
    from kernelskill.review.sandbox import clean_environment

    env, scratch = confine.scratch_environment(clean_environment())
    confine.protect_harness(env)  # a child of the same uid cannot read this process's memory (the keys) via /proc
    request = ProbeRequest(path=str(problem.path), source=problem.source).model_dump_json().encode()
    try:
        out, err, returncode, seconds = _run_child([python, "-m", "kernelskill.review.probe"], request, env, scratch,
                                                   timeout_s)
    except OSError as exc:
        raise KernelSkillError(f"cannot start the problem probe with {python!r}: {exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _read_answer(problem, out, err, returncode, seconds, timeout_s)


def _run_child(command: list[str], request: bytes, env: dict[str, str], cwd: Path,
               timeout_s: float) -> tuple[bytes, bytes, int | None, float]:
    """(stdout and stderr, each cut to OUTPUT_LIMIT, the exit code or None when killed at the limit, seconds)."""
    start = time.monotonic()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=cwd, start_new_session=True)  # its own process group, killed whole
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    kept: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}

    def drain(stream, name: str, tail: bool) -> None:
        buffer = kept[name]
        while chunk := stream.read1(1 << 16):
            buffer += chunk
            if len(buffer) > OUTPUT_LIMIT:  # stdout keeps its head (the answer is short), stderr its tail
                if tail:
                    del buffer[:len(buffer) - OUTPUT_LIMIT]
                else:
                    del buffer[OUTPUT_LIMIT:]

    def feed() -> None:
        try:
            proc.stdin.write(request)
            proc.stdin.close()
        except OSError:  # the child ended before reading it: its exit says why
            pass

    threads = [threading.Thread(target=drain, args=(proc.stdout, "out", False), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, "err", True), daemon=True),
               threading.Thread(target=feed, daemon=True)]
    for t in threads:
        t.start()
    try:
        returncode: int | None = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        _kill_group(proc.pid)  # also what the problem started and left behind when the child ended on its own
        proc.wait()
    for t in threads:
        t.join(timeout=5)
    return bytes(kept["out"]), bytes(kept["err"]), returncode, time.monotonic() - start


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_answer(problem: Problem, out: bytes, err: bytes, returncode: int | None, seconds: float,
                 timeout_s: float) -> Probe:
    lines = [line for line in out.decode(errors="replace").splitlines() if line.strip()]
    answers = []
    for line in lines[:2]:  # at most two: the check, then the count
        try:
            answers.append(ANSWER.validate_json(line))
        except ValidationError:
            answers = []
            break
    if len(lines) > 2:
        answers = []
    failed = next((a for a in answers if isinstance(a, SandboxFailed)), None)
    if failed is not None:
        raise SandboxUnavailable(
            f"problem code runs only in the sandbox, and the sandbox could not be set up for {problem.path}: "
            f"{' '.join(failed.error.split())}")
    checked = next((a for a in answers if isinstance(a, Checked)), None)
    counted = next((a for a in answers if isinstance(a, Counted)), None)
    if checked is not None and checked.error is not None:
        return Probe(checked.error, ProblemWork(source=SOURCE, note=f"the problem cannot run: {checked.error}"))
    if checked is not None and counted is not None:
        return Probe(None, counted.work)
    if returncode is None:
        how = f"did not finish within {timeout_s:g} s, the problem check's time limit, and was stopped"
    elif answers or not lines:
        how = f"ended without an answer ({_describe_exit(returncode)})"
    else:
        how = f"gave an answer that is not one ({_describe_exit(returncode)})"
    if checked is not None:  # the problem runs; only its work count failed
        return Probe(None, ProblemWork(source=SOURCE, note=f"counting the problem's work {how}"))
    tail = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    said = f"; its last words: {tail[-1].strip()[:300]}" if tail and returncode is not None else ""
    error = (f"{problem.path}: building Model and drawing inputs {how}{said}. Run the file's get_init_inputs(), "
             "Model(...) and get_inputs() by hand to see where it waits or fails")
    return Probe(error, ProblemWork(source=SOURCE, note=f"the problem cannot run: {error}"))


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


# ---- the child's side ----------------------------------------------------------------------------------------------
def main() -> int:
    answer = os.fdopen(os.dup(1), "w")  # the answer's channel; what problem code prints goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def say(message: _Message) -> None:
        answer.write(message.model_dump_json() + "\n")
        answer.flush()

    try:
        from kernelskill.review import confine

        confine.apply()  # first: before any problem code, and while this process is single-threaded
    except BaseException as exc:  # noqa: BLE001 - whatever failed, nothing of the problem may run unconfined
        say(SandboxFailed(kind="sandbox", error=f"{type(exc).__name__}: {exc}"))
        return 3
    _bind_to_parent()
    request = ProbeRequest.model_validate_json(sys.stdin.buffer.read(REQUEST_LIMIT))
    problem = Problem(path=Path(request.path), source=request.source, name=Path(request.path).stem)
    from kernelskill.problem import build_and_draw
    from kernelskill.review.work import count_work

    try:
        build_and_draw(problem)
    except ProblemError as exc:
        say(Checked(kind="checked", error=str(exc)))
        return 0
    say(Checked(kind="checked"))
    say(Counted(kind="counted", work=count_work(problem)))
    return 0


def _bind_to_parent() -> None:
    """No core dumps, and die with the harness (a killed harness leaves no probe behind). After confine.apply():
    changing the uid clears the parent-death signal."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux/glibc: the harness still kills the group at the time limit
        pass


if __name__ == "__main__":
    sys.exit(main())
