"""The CPU a review's timed calls run on.

A runner whose calls wait on the host (a few microseconds of GPU work each, or a forward that synchronizes with
the host) is timed at its host's pace, and on the H100 host that pace follows the CPU the process runs on: the
judge's batch loop ran at 16.7-18.4 us a call on CPUs 0 and 8 and at 22.2-26.6 us on the fourteen others, run
after run, and an unpinned process drew one group or the other (docs/h200/timing, session 24). The reference and
the candidate are timed in two processes (the trust boundary), so each drew its own pace: a host-synchronized task
(KernelBench's L3/30) scattered from 0.57x to 1.0x between reviews of the same kernel.

So the judge runs both runners' timed work on one CPU, every thread of each runner and of anything it started,
from this side (a runner cannot move itself: its seccomp filter refuses `sched_setaffinity`, review/confine_os.py):
the reference runner's timing and batch, the candidate runner's `time` stage and batch. The CPU is the fastest
launcher of those this process may use, found once per process by `python -m kernelskill.review.pace` (our own code,
no candidate's: a short launch loop on each CPU), and one CPU per GPU where several GPUs time at once, in this
process or in others on the machine (each CPU claimed by a lock file).

`KERNELSKILL_TIMING_CPU`: `auto` (the default: the probe's choice), `off`, or CPU numbers (`3`, or `3,11` for the
GPUs in the order their first reviews come). CPU reviews are not pinned unless CPUs are named: their timed calls
use several threads of their own.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.errors import KernelSkillError
from kernelskill.review.processes import descendants, threads

ENV = "KERNELSKILL_TIMING_CPU"
CLAIMS = Path(tempfile.gettempdir()) / f"kernelskill-timing-cpus-{os.getuid()}"  # one lock file per CPU claimed
PROBE_LIMIT_S = 60.0


@dataclass
class Choice:
    """The CPUs ranked fastest first, with what ranked them (the probe's paces, or why there are none)."""
    cpus: list[int]
    paces_us: dict[int, float] = field(default_factory=dict)
    how: str = ""


class _Chooser:
    """This process's timing CPUs, one per GPU. Each is claimed on this machine (a lock file held while the process
    lives, CLAIMS): processes that review on other GPUs of the machine at once (a Ray node's workers, two `bench`
    runs) each take another CPU; where every CPU is claimed, the first of the ranking is shared, and said so."""

    def __init__(self, claims: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._choice: Choice | None = None
        self._taken: dict[str, int] = {}  # the GPUs' key (CUDA_VISIBLE_DEVICES) -> its CPU
        self._claims = claims or CLAIMS
        self._held: dict[int, int] = {}  # CPU -> the open lock file that claims it
        self.shared: set[int] = set()  # CPUs taken although another process had claimed them

    def cpu(self, device: str, env: dict[str, str] | None = None) -> int | None:
        """The CPU the timed work of a review on `device` runs on (env: the runners' extra environment, whose
        CUDA_VISIBLE_DEVICES names the GPU), or None where nothing is pinned."""
        named = _named()
        if named == "off" or (named == "auto" and not device.startswith("cuda")):
            return None
        key = (env or {}).get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", "")) + "|" + device
        with self._lock:
            if key in self._taken:
                return self._taken[key]
            if isinstance(named, list):
                ranked = named
            else:
                if self._choice is None:
                    self._choice = probe()
                ranked = self._choice.cpus
            cpu = next((c for c in ranked if c not in self._taken.values() and self._claim(c)), None)
            if cpu is None:
                cpu = ranked[0]
                self.shared.add(cpu)
            self._taken[key] = cpu
            return cpu

    def _claim(self, cpu: int) -> bool:
        """Whether this process now holds `cpu`'s lock file (a lock no process on this machine holds; released by
        the kernel when this process ends). A folder that cannot be made or locked claims nothing: every CPU then
        counts as free, as before claims existed."""
        try:
            self._claims.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self._claims / f"{cpu}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._held[cpu] = fd
        return True

    def describe(self, cpu: int) -> str:
        """One line on why `cpu` times the calls, for the review's record."""
        choice = self._choice
        shared = ", shared with another process's timing: every CPU was claimed" if cpu in self.shared else ""
        if choice is None or not choice.paces_us:
            why = choice.how if choice is not None else f"named by {ENV}"
            return f"timed calls of both runners on CPU {cpu} ({why}{shared})"
        paces = sorted(choice.paces_us.values())
        return (f"timed calls of both runners on CPU {cpu}: {choice.paces_us.get(cpu, 0.0):.1f} us a launch by the "
                f"judge's probe, against a median of {paces[len(paces) // 2]:.1f} us over {len(paces)} CPUs{shared}")

    def reset(self) -> None:
        """Forget the choice and give the claims back."""
        with self._lock:
            for fd in self._held.values():
                os.close(fd)
            self._choice, self._taken, self._held, self.shared = None, {}, {}, set()


def _allowed() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _named() -> str | list[int]:
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value in ("auto", "off"):
        return value
    allowed = _allowed()
    try:
        cpus = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        cpus = []
    if not cpus or any(c not in allowed for c in cpus):
        raise KernelSkillError(f"{ENV}={value!r}: give `auto`, `off`, or CPU numbers this process may use "
                               f"({allowed[0]}-{allowed[-1]}), comma-separated for several GPUs")
    return cpus


def probe(device: str = "cuda") -> Choice:
    """Rank this process's CPUs by the launch pace of a fresh process moved to each in turn (review/pace.py). Where
    the probe cannot run (no GPU, a failed start), the CPUs in their order: still one CPU for both runners."""
    allowed = _allowed()
    from kernelskill.review.quiet import BUILDS  # builds held still: their compilers would rank the CPUs instead

    try:
        with BUILDS.quiet():
            done = subprocess.run([sys.executable, "-m", "kernelskill.review.pace", "--device", device,
                                   "--cpus", ",".join(map(str, allowed))],
                                  capture_output=True, text=True, timeout=PROBE_LIMIT_S)
        paces = {int(k): float(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, AttributeError) as exc:
        tail = ""
        if isinstance(exc, (ValueError, IndexError)) and "done" in locals():
            tail = ": " + (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return Choice(cpus=allowed, how=f"the launch probe did not run ({type(exc).__name__}{tail}); the first CPU")
    ranked = sorted(paces, key=lambda c: (paces[c], c))
    return Choice(cpus=ranked + [c for c in allowed if c not in paces], paces_us=paces, how="the launch probe")


CHOOSER = _Chooser()


def timing_cpu(device: str, env: dict[str, str] | None = None) -> int | None:
    return CHOOSER.cpu(device, env)


def _threads(pid: int) -> list[int]:
    """Every thread of `pid` and of each process under it."""
    return [tid for each in (pid, *descendants(pid)) for tid in threads(each)]


@dataclass
class Pin:
    cpu: int | None
    moved: int = 0  # threads put on the CPU
    refused: list[str] = field(default_factory=list)  # why some could not be moved (a flag for the record)


@contextmanager
def pinned(pid: int | None, cpu: int | None) -> Iterator[Pin]:
    """For the block, every thread of `pid` and of each process under it on `cpu` (threads they start meanwhile
    inherit it); after it, every thread of the tree back on the CPUs `pid` had. Nothing happens for a None `cpu`;
    a thread that ends meanwhile is skipped, one that cannot be moved is named in `refused`."""
    pin = Pin(cpu=cpu)
    if cpu is None or pid is None:
        yield pin
        return
    try:
        before = os.sched_getaffinity(pid)
    except OSError:
        yield pin
        return
    for tid in _threads(pid):
        try:
            os.sched_setaffinity(tid, {cpu})
            pin.moved += 1
        except ProcessLookupError:
            pass
        except OSError as exc:
            pin.refused.append(f"thread {tid}: {exc.strerror or exc}")
    try:
        yield pin
    finally:
        for tid in _threads(pid):
            try:
                os.sched_setaffinity(tid, before)
            except OSError:
                pass
