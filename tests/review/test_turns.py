"""Turns on a shared device (review/turns.py): untimed steps side by side, each timed step alone, and every other
review's runners stopped while it runs. Real processes, real threads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from kernelskill.review.turns import Turns
from tests.conftest import DATA, fast_settings

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0].decode()


@pytest.fixture
def spinner():
    """A runner that works outside any step it was granted (a candidate's background thread)."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.3)
    yield proc.pid
    proc.kill()
    proc.wait()


def test_untimed_steps_run_side_by_side_and_a_timed_one_alone():
    turns = Turns()
    a, b, c = turns.turn(), turns.turn(), turns.turn()
    events: list[str] = []
    a.begin("plain")
    b.begin("plain")  # beside a's: granted at once
    timed = threading.Thread(target=lambda: (c.begin("timed"), events.append("c timed"), time.sleep(0.2),
                                            events.append("c done"), c.end()), daemon=True)
    timed.start()
    time.sleep(0.2)
    assert events == []  # two untimed steps still run
    late = threading.Thread(target=lambda: (a.begin("plain"), events.append("a again"), a.end()), daemon=True)
    a.end()
    late.start()  # asked for after the timed step: waits for it
    time.sleep(0.2)
    assert events == []  # b's step still runs, and a's new one waits behind c's
    b.end()
    timed.join(5)
    late.join(5)
    assert events == ["c timed", "c done", "a again"]
    for t in (a, b, c):
        t.close()


def test_a_timed_step_stops_every_other_reviews_runner_until_it_ends(spinner):
    # a runner outside its steps is not trusted to stay idle: while another review's step is timed it does nothing
    turns = Turns()
    mine, other = turns.turn(), turns.turn()
    other.add(spinner)
    with mine.step("timed"):
        time.sleep(0.1)
        before = _cpu_ticks(spinner)
        time.sleep(0.5)
        assert _cpu_ticks(spinner) - before <= 1 and _state(spinner) == "T"
    time.sleep(0.3)
    assert _state(spinner) != "T" and _cpu_ticks(spinner) > before  # continued after
    assert 0.5 <= other.paused() < 2  # its limits grow by that much
    assert mine.paused() == 0.0
    mine.close()
    other.close()


def test_a_runner_started_during_a_timed_step_is_stopped_at_once(spinner):
    turns = Turns()
    mine, other = turns.turn(), turns.turn()
    mine.begin("timed")
    other.add(spinner)
    time.sleep(0.1)
    assert _state(spinner) == "T"
    mine.end()
    time.sleep(0.1)
    assert _state(spinner) != "T"
    mine.close()
    other.close()


def test_a_review_holding_the_device_alone_takes_its_steps_without_waiting():
    turns = Turns()
    mine, other = turns.turn(), turns.turn()
    with mine.hold_alone():
        waited = [mine.begin("plain"), mine.begin("timed")]  # its own steps join the hold
        mine.end()
        blocked = threading.Thread(target=lambda: (other.begin("plain"), other.end()), daemon=True)
        blocked.start()
        time.sleep(0.2)
        assert blocked.is_alive()  # nobody else's step runs meanwhile
    blocked.join(5)
    assert not blocked.is_alive() and waited == [0.0, 0.0]
    mine.close()
    other.close()


P01 = DATA / "problems" / "p01_pointwise_gelu_chain.py"
TRITON_OK = DATA / "candidates" / "p01_pointwise_gelu_chain" / "triton_ok.py"


def _review(turn, log_dir, **overrides):
    from kernelskill.candidate import read_candidate
    from kernelskill.review.reviewer import review

    settings = fast_settings(**overrides)
    return review(P01, read_candidate(TRITON_OK, settings.backend), settings, log_dir=log_dir, turn=turn)


@pytest.mark.slow
def test_reviews_sharing_a_device_each_get_the_verdict_they_earn(tmp_path):
    # two judged reviews at once under one device's turns: every runner stage and judge step takes its turn, and
    # each review's runners were stopped while the other's steps were timed
    turns = Turns()
    results = {}

    def one(name: str) -> None:
        turn = turns.turn()
        try:
            results[name] = _review(turn, tmp_path / name)
        finally:
            turn.close()

    threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert all(results[n].correct and results[n].speedup for n in ("a", "b")), results
    # each review: the reference's timing, the runner's timing stage, the two batches
    assert turns.timed_steps == 6 and turns.stops >= 1


@pytest.mark.slow
def test_time_stopped_for_another_review_counts_against_no_limit(tmp_path):
    # the reference runner is stopped from its start while another review's timed step runs for longer than the
    # load stage's limit: its review must not fail for that
    from kernelskill.settings import StageTimeouts

    turns = Turns()
    other, mine = turns.turn(), turns.turn()
    other.begin("timed")
    add, timers = mine.add, []

    def first_runner(pid: int) -> None:  # the other's step ends 4 s after the runner exists, however long it took
        add(pid)                         # to start (a cold start on a loaded 2-core machine took seconds)
        if not timers:
            timers.append(threading.Timer(4.0, other.end))
            timers[0].start()

    mine.add = first_runner  # type: ignore[method-assign]
    result = _review(mine, tmp_path, timeouts=StageTimeouts(load=3, compile=30, verify=30, time=30))
    assert result.correct, result.error
    assert mine.paused() >= 3.0
    mine.close()
    other.close()


def test_a_gated_runner_starts_its_stage_only_on_the_harness_go(tmp_path):
    # what makes a timed step wait for an honest runner's work instead of stopping it half-way: the runner itself
    # waits for its turn before each stage (worker/session.StageLog)
    code = ("from kernelskill.review.worker.session import StageLog\n"
            "class Channel:\n"
            "    def send(self, message): print('announced', message.stage, flush=True)\n"
            "log = StageLog(Channel(), gated=True)\n"
            "log.stage('verify')\n"
            "print('started', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert proc.stdout.readline().strip() == "announced verify"
        time.sleep(0.5)
        assert proc.poll() is None  # still waiting: it has not started the stage
        proc.stdin.write('{"name": "go"}\n')
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "started"
    finally:
        proc.kill()
        proc.wait()
