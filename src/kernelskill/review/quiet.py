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

The CPU the batch's runner runs on is pinning.py's.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from kernelskill.review.processes import descendants, signal_all, stop_tree, threads


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
    def quiet(self) -> Iterator[None]:
        """Stop every registered build's process tree for the duration of the block (or none, when disabled)."""
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
    for tid in threads(pid) or [pid]:
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except (OSError, AttributeError):
            try:
                os.setpriority(os.PRIO_PROCESS, tid, 19)
            except OSError:
                pass
