"""Threads, processes and kills: what the loop does to the store in real life."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kernelskill.store import RunStore

from .conftest import llm_call


def test_threads_share_one_store(store, task):
    run_id, task_id = task
    threads, per_thread = 8, 50
    start = threading.Barrier(threads)
    ids: list[int] = []
    errors: list[BaseException] = []

    def seed(slot: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                ids.append(store.add_llm_call(**llm_call(run_id, task_id, slot=slot, agent="generator",
                                                         reply=f"seed {slot} reply {i}")))
                if i % 10 == 0:  # reads interleaved with writes
                    store.llm_totals(task_id)
        except BaseException as exc:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=seed, args=(slot,)) for slot in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    calls = store.llm_calls(task_id=task_id)
    assert len(calls) == len(set(ids)) == threads * per_thread
    for slot in range(threads):  # each thread's calls in its own order
        replies = [c.reply for c in calls if c.slot == slot]
        assert replies == [f"seed {slot} reply {i}" for i in range(per_thread)]


def _append_calls(run_dir: str, run_id: int, task_id: int, slot: int, count: int, go) -> None:
    """A second process's writer (module level: the spawn start method imports it by name)."""
    go.wait(30)
    with RunStore.open(Path(run_dir)) as store:
        for i in range(count):
            store.add_llm_call(**llm_call(run_id, task_id, slot=slot, reply=f"process {slot} call {i}"))


def test_two_processes_append_to_one_store(tmp_path):
    with RunStore.create(tmp_path) as store:
        run_id = store.add_run("bench", "fake:", {})
        task_id = store.add_task(run_id, "t", "t.py", "src")
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    count = 150
    procs = [ctx.Process(target=_append_calls, args=(str(tmp_path), run_id, task_id, slot, count, go))
             for slot in (1, 2)]
    for proc in procs:
        proc.start()
    go.set()  # both start writing together
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0, 0]
    with RunStore.open(tmp_path) as store:
        calls = store.llm_calls(task_id=task_id)
        assert len(calls) == 2 * count
        for slot in (1, 2):
            assert [c.reply for c in calls if c.slot == slot] == [f"process {slot} call {i}" for i in range(count)]
        assert store.llm_totals(task_id)["calls"] == 2 * count


CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kernelskill.store import RunStore

    store = RunStore.open(Path(sys.argv[1]))
    task = store.tasks(store.latest_run().id)[0]
    round_id = store.start_round(task.id, 1, "optimize")
    store.add_candidate(task.id, round_id, "r1", "print('round 1')\\n", origin="optimize")
    store.finish_round(round_id, "done", method="fuse", state={"round": 1, "best": "r1"})
    store.start_round(task.id, 2, "optimize")  # the round the kill interrupts
    i = 0
    while True:  # writes until killed; a line is printed only after its write committed
        store.add_llm_call(run_id=task.run_id, task_id=task.id, round_idx=2, slot=0, agent="planner", attempt=1,
                           messages=[{"role": "user", "content": "x" * 2000}], reply=str(i), error=None,
                           input_tokens=1, output_tokens=1, tokens_estimated=False, cost_usd=None, latency_s=0.0,
                           attempts=1, model="fake:")
        print(i, flush=True)
        i += 1
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_writer_loses_nothing_it_committed(tmp_path):
    with RunStore.create(tmp_path) as store:
        run_id = store.add_run("optimize", "fake:", {})
        task_id = store.add_task(run_id, "t", "t.py", "src")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        last = None
        for line in child.stdout:
            last = int(line)
            if last >= 200:
                break
        assert last is not None, child.stderr.read()
    finally:
        os.kill(child.pid, signal.SIGKILL)  # mid-way: most likely inside a write
        child.wait(30)
    assert child.returncode == -signal.SIGKILL

    with RunStore.open(tmp_path) as store:
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        replies = [int(c.reply) for c in store.llm_calls(task_id=task_id)]
        assert replies[: last + 1] == list(range(last + 1))  # every call the child reported, in order
        assert [(r.idx, r.status) for r in store.rounds(task_id)] == [(1, "done"), (2, "running")]
        assert store.last_state(task_id) == (1, {"round": 1, "best": "r1"})
        assert store.abandon_unfinished_rounds(task_id) == 1
        (candidate,) = store.candidates(task_id)
        assert (tmp_path / candidate.path).read_text() == candidate.source == "print('round 1')\n"
        store.add_llm_call(**llm_call(run_id, task_id))  # and the store takes writes again


def test_a_writer_waits_for_another_process_transaction(tmp_path):
    """busy_timeout: a write lock held elsewhere for a moment delays a write instead of failing it."""
    with RunStore.create(tmp_path) as store:
        run_id = store.add_run("bench", "fake:", {})
        other = sqlite3.connect(tmp_path / "run.db", isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        threading.Timer(0.5, lambda: other.execute("COMMIT")).start()
        store.add_llm_call(**llm_call(run_id))
        other.close()
        assert len(store.llm_calls(run_id=run_id)) == 1
