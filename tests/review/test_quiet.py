"""Builds held still while the judge measures (review/quiet.py): real processes, stopped and continued."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from kernelskill.review.processes import descendants
from kernelskill.review.quiet import Builds

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0].decode()


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.fixture
def build():
    """A stand-in for a build worker: a process whose child spins (a compiler)."""
    code = "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'while True: pass'])\ntime.sleep(120)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 20
    while not descendants(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    kids = descendants(proc.pid)
    assert kids, "the stand-in's child never started"
    yield proc.pid, kids[0]
    for pid in (kids[0], proc.pid):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    proc.wait()


def test_a_quiet_window_stops_every_process_of_a_build_then_continues_them(build, monkeypatch):
    monkeypatch.delenv("KERNELSKILL_QUIET_BUILDS", raising=False)
    parent, child = build
    builds = Builds()
    builds.add(parent)
    assert os.sched_getscheduler(child) == os.SCHED_IDLE  # a runner takes a core before the compiler does
    with builds.quiet():
        time.sleep(0.1)  # a signal is delivered asynchronously
        assert _state(parent) == "T" and _state(child) == "T"
        before = _cpu_ticks(child)
        time.sleep(0.5)
        assert _cpu_ticks(child) == before  # stopped: not a tick of CPU
    time.sleep(0.3)
    assert _state(child) != "T" and _state(parent) != "T"
    assert _cpu_ticks(child) > before  # continued: spinning again
    assert builds.windows == 1


def test_a_build_that_registers_during_a_window_is_stopped_at_once(build, monkeypatch):
    monkeypatch.delenv("KERNELSKILL_QUIET_BUILDS", raising=False)
    parent, child = build
    builds = Builds()
    with builds.quiet():
        builds.add(parent)
        time.sleep(0.1)
        assert _state(child) == "T"
    time.sleep(0.2)
    assert _state(child) != "T"


def test_overlapping_windows_continue_the_builds_when_the_last_one_ends(build, monkeypatch):
    # several GPUs' reviews, each with its own batch: a build continued by the first window to end would run beside
    # the other's batch
    monkeypatch.delenv("KERNELSKILL_QUIET_BUILDS", raising=False)
    parent, child = build
    builds = Builds()
    builds.add(parent)
    first, second = builds.quiet(), builds.quiet()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    time.sleep(0.2)
    assert _state(child) == "T"
    second.__exit__(None, None, None)
    time.sleep(0.2)
    assert _state(child) != "T"


def test_the_switch_turns_both_off(build, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_QUIET_BUILDS", "0")
    parent, child = build
    builds = Builds()
    builds.add(parent)
    assert os.sched_getscheduler(child) != os.SCHED_IDLE
    with builds.quiet():
        time.sleep(0.1)
        assert _state(child) != "T"
