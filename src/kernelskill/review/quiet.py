"""Builds held still while the judge measures.

`bench` and `optimize` build the next candidates (prebuilds, on CPU cores) while a GPU reviews the current one. A
kernel whose pace is set by its host (a few microseconds of GPU work a call) is judged by the wall-clock pace of a
batch of calls from Python, and on the H200 host that pace moved by up to 40% between reviews of the same kernel
while six compilers ran beside it. So:

- every process of a build worker runs under SCHED_IDLE (set from this side when the build registers): a runner
  always takes a core before a compiler does;
- while the judge runs a batch (`quiet()`), every build's process tree is stopped (SIGSTOP) and continued after,
  as a batch is short (about a tenth of a second of calls, plus its files).

Windows from several reviews at once (several GPUs) overlap: the builds continue when the last one ends. A build
that registers during a window is stopped at once. `KERNELSKILL_QUIET_BUILDS=0` turns both off (to measure what
they change, side by side).

The same window may also put the batch's runner on one CPU (`on_one_cpu`, `KERNELSKILL_BATCH_CPU`, off by default):
an experiment on the launch pace's process-to-process moves (docs/h200/trust, session 15).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from kernelskill.errors import KernelSkillError
from kernelskill.review.processes import descendants, signal_all, stop_tree


def _enabled() -> bool:
    return os.environ.get("KERNELSKILL_QUIET_BUILDS", "1") != "0"


class Builds:
    """The build workers of this process, by pid."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pids: set[int] = set()
        self._depth = 0  # quiet windows open now
        self._stopped: list[int] = []
        self.windows = 0  # windows opened that stopped at least one process (for tests and the record)

    def add(self, pid: int) -> None:
        if not _enabled():
            return
        for each in (pid, *descendants(pid)):
            _idle_priority(each)
        with self._lock:
            self._pids.add(pid)
            if self._depth:
                self._stopped += stop_tree(pid)

    def discard(self, pid: int) -> None:
        with self._lock:
            self._pids.discard(pid)

    @contextmanager
    def quiet(self, runner=None) -> Iterator[None]:
        """Stop every registered build's process tree for the duration of the block (or none, when disabled); and
        where KERNELSKILL_BATCH_CPU asks, run the main threads of `runner` (the one whose batch the block holds) on
        one CPU (`on_one_cpu`)."""
        with on_one_cpu(getattr(getattr(runner, "proc", None), "pid", None)):
            with self._quiet():
                yield

    @contextmanager
    def _quiet(self) -> Iterator[None]:
        if not _enabled():
            yield
            return
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                for pid in self._pids:
                    self._stopped += stop_tree(pid)
                self.windows += bool(self._stopped)
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    stopped, self._stopped = self._stopped, []
                    signal_all(stopped, signal.SIGCONT)


BUILDS = Builds()


def _idle_priority(pid: int) -> None:
    """SCHED_IDLE for every thread of `pid` (the processes it starts later inherit it); nice 19 where that policy is
    refused. A scheduling preference only: the stop above is what holds during a batch."""
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        threads = [pid]
    for tid in threads:
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except (OSError, AttributeError):
            try:
                os.setpriority(os.PRIO_PROCESS, tid, 19)
            except OSError:
                pass


def batch_cpu() -> int | None:
    """The CPU both runners' batches run on, from KERNELSKILL_BATCH_CPU: a CPU number this process may use, or
    `auto` (the last of them); None when unset or `off`. An experiment's switch, off by default: on the H100 host
    the launch pace of one loop moved by up to 2x from process to process (docs/h200/trust, session 15), and the
    judge's two batches run in two processes."""
    value = os.environ.get("KERNELSKILL_BATCH_CPU", "").strip().lower()
    if value in ("", "off"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if value == "auto":
        return allowed[-1]
    if not value.isdigit() or int(value) not in allowed:
        raise KernelSkillError(f"KERNELSKILL_BATCH_CPU={value!r}: give one of the CPUs this process may use "
                         f"({allowed[0]}-{allowed[-1]}), `auto` or `off`")
    return int(value)


@contextmanager
def on_one_cpu(pid: int | None) -> Iterator[int | None]:
    """For the block, the main thread of `pid` and of every process under it on `batch_cpu()` (their other threads,
    the CUDA driver's among them, stay where they were); each put back after. Does nothing without a CPU asked for,
    and skips a process that is gone or not this user's to move."""
    cpu = batch_cpu() if pid is not None else None
    saved: dict[int, set[int]] = {}
    if cpu is not None:
        for each in (pid, *descendants(pid)):
            try:
                saved[each] = os.sched_getaffinity(each)
                os.sched_setaffinity(each, {cpu})
            except OSError:
                saved.pop(each, None)
    try:
        yield cpu
    finally:
        for each, cpus in saved.items():
            try:
                os.sched_setaffinity(each, cpus)
            except OSError:
                pass

