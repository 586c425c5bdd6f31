"""The CPU a review's timed calls run on (review/pinning.py, review/pace.py): real processes and threads moved, and a
real review whose runners say where their calls ran."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelskill.errors import KernelSkillError
from kernelskill.review import pinning
from kernelskill.review.processes import descendants
from tests.conftest import DATA, run_review

CPUS = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(len(CPUS) < 2 or not os.path.isdir("/proc"),
                                reason="needs /proc and two CPUs to move threads to one of them")


def _affinities(pid: int) -> list[set[int]]:
    found = []
    for each in (pid, *descendants(pid)):
        for tid in os.listdir(f"/proc/{each}/task"):
            found.append(os.sched_getaffinity(int(tid)))
    return found


@pytest.fixture
def runner():
    """A stand-in for a runner: a process with a thread of its own and a child process, and a pipe on which it
    starts one more thread when asked."""
    code = ("import subprocess, sys, threading, time\n"
            "threading.Thread(target=time.sleep, args=(120,), daemon=True).start()\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            "print('up', flush=True)\n"
            "sys.stdin.readline()\n"
            "threading.Thread(target=time.sleep, args=(120,), daemon=True).start()\n"
            "print('more', flush=True)\n"
            "time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    deadline = time.monotonic() + 20
    while not descendants(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    yield proc
    for pid in (*descendants(proc.pid), proc.pid):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    proc.wait()


def test_every_thread_of_a_runner_and_of_what_it_started_runs_on_the_cpu_and_goes_back_after(runner):
    before = _affinities(runner.pid)
    assert len(before) >= 3 and all(a == set(CPUS) for a in before)
    with pinning.pinned(runner.pid, CPUS[-1]) as pin:
        assert all(a == {CPUS[-1]} for a in _affinities(runner.pid))
        runner.stdin.write("go\n")
        runner.stdin.flush()
        assert runner.stdout.readline().strip() == "more"  # a thread started inside the block inherits the CPU
        inside = _affinities(runner.pid)
        assert len(inside) == len(before) + 1 and all(a == {CPUS[-1]} for a in inside)
    assert pin.moved == len(before) and not pin.refused
    assert all(a == set(CPUS) for a in _affinities(runner.pid))  # the new thread too


def test_nothing_moves_without_a_cpu(runner):
    with pinning.pinned(runner.pid, None) as pin:
        assert all(a == set(CPUS) for a in _affinities(runner.pid))
    assert pin.moved == 0


def _ranked(monkeypatch) -> None:
    """A probe that ranks the last CPU fastest, then the first."""
    monkeypatch.setattr(pinning, "probe", lambda device="cuda": pinning.Choice(cpus=[CPUS[-1], CPUS[0]],
                                                                              paces_us={CPUS[-1]: 9.0, CPUS[0]: 20.0}))


def test_the_setting_names_the_cpus_or_says_what_it_takes(monkeypatch, tmp_path):
    chooser = pinning._Chooser(tmp_path)
    _ranked(monkeypatch)
    assert chooser.cpu("cpu") is None  # auto: a CPU review's timed calls keep their threads' CPUs
    assert chooser.cpu("cuda", {"CUDA_VISIBLE_DEVICES": "0"}) == CPUS[-1]  # the probe's fastest
    assert chooser.cpu("cuda", {"CUDA_VISIBLE_DEVICES": "0"}) == CPUS[-1]  # the same GPU, the same CPU
    assert chooser.cpu("cuda", {"CUDA_VISIBLE_DEVICES": "1"}) == CPUS[0]  # another GPU times beside it: another CPU
    assert "9.0 us a launch" in chooser.describe(CPUS[-1])
    chooser.reset()
    monkeypatch.setenv(pinning.ENV, "off")
    assert pinning._Chooser(tmp_path).cpu("cuda") is None
    monkeypatch.setenv(pinning.ENV, f"{CPUS[0]}")
    assert pinning._Chooser(tmp_path).cpu("cpu") == CPUS[0]  # named: a CPU review too
    for bad in ("fast", "100000", f"{CPUS[0]},x"):
        monkeypatch.setenv(pinning.ENV, bad)
        with pytest.raises(KernelSkillError, match="give `auto`, `off`, or CPU numbers"):
            pinning._Chooser(tmp_path).cpu("cuda")


def test_processes_that_time_on_one_machine_each_claim_a_cpu_of_their_own(monkeypatch, tmp_path):
    # a Ray node's workers each review on a GPU of their own, each in its own process: each would pick the probe's
    # fastest CPU, and their timed calls would share it
    _ranked(monkeypatch)
    first, second, third = (pinning._Chooser(tmp_path) for _ in range(3))
    assert first.cpu("cuda") == CPUS[-1]
    assert second.cpu("cuda") == CPUS[0]
    assert third.cpu("cuda") == CPUS[-1] and "every CPU was claimed" in third.describe(CPUS[-1])
    assert "claimed" not in first.describe(CPUS[-1])
    second.reset()  # a process that ends gives its claim back (the kernel drops its lock)
    fourth = pinning._Chooser(tmp_path)
    assert fourth.cpu("cuda") == CPUS[0]
    for each in (first, third, fourth):
        each.reset()
    # a lock held by another process, as the kernel sees it
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(tmp_path / f'{CPUS[-1]}.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n")], stdout=subprocess.PIPE,
        text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert pinning._Chooser(tmp_path).cpu("cuda") == CPUS[0]
    finally:
        holder.kill()
        holder.wait()
    assert pinning._Chooser(tmp_path).cpu("cuda") == CPUS[-1]


def test_the_probe_times_launches_on_each_cpu():
    choice = pinning.probe("cpu")
    assert sorted(choice.paces_us) == CPUS and all(p > 0 for p in choice.paces_us.values()), choice
    assert choice.cpus[0] == min(choice.paces_us, key=choice.paces_us.get)


def test_a_probe_that_cannot_run_leaves_one_cpu_and_says_why():
    choice = pinning.probe("no-such-device")
    assert choice.cpus == CPUS and not choice.paces_us and "did not run" in choice.how, choice


def _said(log: Path) -> list[str]:
    return re.findall(r"^cpus (\S+)$", log.read_text(), re.M)


def _runs(said: list[str]) -> list[str]:
    """The CPUs the calls said, a run of equal lines as one."""
    return [each for i, each in enumerate(said) if i == 0 or said[i - 1] != each]


@pytest.mark.slow
def test_both_runners_time_their_calls_on_the_chosen_cpu(tmp_path, monkeypatch):
    # each side says on every call where its thread may run: its timed calls and its batch on the CPU the judge
    # chose, every other call where it ran before
    problem, candidate = DATA / "pinning" / "problem.py", DATA / "pinning" / "candidate.py"
    everywhere, one = ",".join(map(str, CPUS)), str(CPUS[-1])
    monkeypatch.setenv(pinning.ENV, one)
    pinning.CHOOSER.reset()
    try:
        result = run_review(problem, candidate, tmp_path / "on", rules="kernelbench")
    finally:
        pinning.CHOOSER.reset()
    assert result.correct, result.error
    assert result.judge_batch is not None and f"CPU {one}" in (result.judge_batch.timing_cpu or "")
    # the reference runner: its stateful check and the judge's trials, then its timing and (with no call between)
    # its batch; the candidate runner: its verify, its timing, the judge's trials, its batch
    assert _runs(_said(tmp_path / "on" / "reference.log")) == [everywhere, one]
    assert _runs(_said(tmp_path / "on" / "worker.log")) == [everywhere, one, everywhere, one]
    monkeypatch.setenv(pinning.ENV, "off")
    result = run_review(problem, candidate, tmp_path / "off", rules="kernelbench")
    assert result.correct and result.judge_batch is not None and result.judge_batch.timing_cpu is None
    for log in ("reference.log", "worker.log"):
        assert set(_said(tmp_path / "off" / log)) == {everywhere}, log
