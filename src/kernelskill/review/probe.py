"""The problem probe: problem code never runs in the harness process, which holds the API keys.

    check_problem(problem)      # ProblemError when Model or get_inputs() cannot run: optimize and bench ask this
                                # before any model call
    probe(problem).work         # the problem's work (work.py), for the speed of light and `memory explain`

One child of the zygote per problem source (`kernelskill.review.probe` run as a module), cached in this process by
path and source sha256, does both: it checks the problem (problem.build_and_draw: Model built and inputs drawn on the meta
device, else the CPU) and then counts its work. It is confined like a review worker: its environment is
sandbox.clean_environment() (allowlisted, nothing that looks like a secret), its working directory a fresh scratch
folder (removed afterwards), a PID namespace of its own, and `confine.apply()` is its first act. A sandbox layer that cannot be applied is
answered as such and raised here as `SandboxUnavailable`, a KernelSkillError: `optimize` and `bench` stop before
anything is asked of a model. The child has a time limit (it and all it started are killed at it), its output is
read up to OUTPUT_LIMIT bytes, and its answer is strict: JSON lines on a result pipe of its own, each validated, while
whatever the problem prints goes to its output. The problem's source reaches the child on stdin: inside the sandbox the
file itself may not be readable.
"""

from __future__ import annotations

import hashlib
import os
import signal
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


def run_probe(problem: Problem, timeout_s: float = PROBE_TIMEOUT_S) -> Probe:
    """Run one probe child for `problem` (no cache): a child of the zygote, confined as a review worker is."""
    from kernelskill.review.confined import run_confined
    from kernelskill.review.sandbox import ZygoteError, clean_environment
    from kernelskill.review.zygote import RESULT_FD

    request = ProbeRequest(path=str(problem.path), source=problem.source).model_dump_json().encode()
    env = clean_environment(interpret=_reviews_interpret())
    start = time.monotonic()
    try:
        done = run_confined("kernelskill.review.probe", [RESULT_FD], env, timeout_s, stdin=request,
                            max_output=OUTPUT_LIMIT)
    except ZygoteError as exc:
        raise KernelSkillError(f"cannot start the problem probe: {exc}") from None
    return _read_answer(problem, done.result, done.output, done.code, time.monotonic() - start, timeout_s)


def _reviews_interpret() -> bool:
    """Whether the probe runs Triton in its interpreter: where no NVIDIA driver is installed, as the reviews there do
    (they run on the CPU). The probe never runs problem code on a GPU, so it may go either way; in the reviews'
    environment it is a child of their zygote instead of starting one of its own (each imports torch: seconds of
    CPU for every `optimize` and `bench` on such a machine). Where a driver is installed, the reviews' environment
    is the one without the interpreter (or they run on the CPU by choice, and the probe keeps a zygote of its own,
    as before)."""
    return not os.path.exists("/dev/nvidiactl")


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
    answer = os.fdopen(int(sys.argv[1]), "w")  # the answer's channel; what problem code prints goes to the output

    def say(message: _Message) -> None:
        answer.write(message.model_dump_json() + "\n")
        answer.flush()

    try:
        from kernelskill.review import confine

        confine.apply()  # first: before any problem code, and while this process is single-threaded
    except BaseException as exc:  # noqa: BLE001 - whatever failed, nothing of the problem may run unconfined
        say(SandboxFailed(kind="sandbox", error=f"{type(exc).__name__}: {exc}"))
        return 3
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


if __name__ == "__main__":
    sys.exit(main())
