"""Every table written and read back, and the rules the loop relies on (last_state, abandoned rounds, files)."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import timezone

import pytest

from kernelskill.review.results import ReviewResult
from kernelskill.store import RunStore

from .conftest import PROBLEM, llm_call


def test_runs_round_trip(store):
    assert store.latest_run() is None
    first = store.add_run("bench", "fake:", {"a": [1, 2]})
    second = store.add_run("optimize", "openai/gpt-4o", {"rounds": 5, "nested": {"x": None}})
    run = store.run(second)
    assert (run.kind, run.status, run.model, run.config) == ("optimize", "running", "openai/gpt-4o",
                                                            {"rounds": 5, "nested": {"x": None}})
    assert run.finished_at is None and run.created_at.tzinfo == timezone.utc
    assert run.kernelskill_version
    assert store.latest_run().id == second and store.run(first).kind == "bench"

    store.set_run_status(second, "interrupted")
    assert store.run(second).status == "interrupted" and store.run(second).finished_at is not None
    store.set_run_status(second, "running")  # resumed
    assert store.run(second).finished_at is None
    store.set_run_status(second, "finished")
    assert store.run(second).finished_at >= store.run(second).created_at


def test_bad_arguments_and_missing_rows_are_bugs_not_user_errors(store, task):
    run_id, task_id = task
    with pytest.raises(ValueError, match="run kind must be one of"):
        store.add_run("tune", "fake:", {})
    with pytest.raises(ValueError, match="task status"):
        store.set_task_status(task_id, "done")
    with pytest.raises(ValueError, match="ended status"):
        store.finish_round(store.start_round(task_id, 0, "seed"), "running")
    with pytest.raises(LookupError, match="no task with id 999"):
        store.task(999)
    with pytest.raises(LookupError, match="no run with id 999"):
        store.set_run_status(999, "failed")
    with pytest.raises(sqlite3.IntegrityError):  # foreign keys are on
        store.add_task(999, "x", "x.py", "src")
    with pytest.raises(sqlite3.IntegrityError):  # one task name per run
        store.add_task(run_id, "19_ReLU", "other.py", "src")


def test_tasks_round_trip(store, task):
    run_id, task_id = task
    row = store.task(task_id)
    assert (row.run_id, row.name, row.problem_path, row.problem_source, row.status) == (
        run_id, "19_ReLU", "problems/19_ReLU.py", PROBLEM, "pending")
    assert row.problem_sha256 == hashlib.sha256(PROBLEM.encode()).hexdigest()
    assert row.started_at is None and row.summary is None and row.reason is None
    other = store.add_task(run_id, "1_Conv", "problems/1_Conv.py", "x")
    assert [t.id for t in store.tasks(run_id)] == [task_id, other]
    assert store.find_task(run_id, "1_Conv").id == other and store.find_task(run_id, "nope") is None

    store.set_task_status(task_id, "running")
    started = store.task(task_id).started_at
    assert started is not None and store.task(task_id).finished_at is None
    store.set_task_status(task_id, "failed", reason="no seed compiled", summary={"best": None})
    row = store.task(task_id)
    assert (row.status, row.reason, row.summary) == ("failed", "no seed compiled", {"best": None})
    assert row.finished_at is not None
    store.set_task_status(task_id, "running")  # resumed: the reason goes, the summary stays, started_at is kept
    row = store.task(task_id)
    assert (row.reason, row.summary, row.started_at, row.finished_at) == (None, {"best": None}, started, None)

    a = store.add_candidate(task_id, None, "seed_0", "A", origin="seed")
    b = store.add_candidate(task_id, None, "seed_1", "B", origin="seed")
    store.set_task_kernels(task_id, best=a.id, base=b.id)
    assert (store.task(task_id).best_candidate_id, store.task(task_id).base_candidate_id) == (a.id, b.id)
    store.set_task_kernels(task_id, best=b.id, base=None)
    assert (store.task(task_id).best_candidate_id, store.task(task_id).base_candidate_id) == (b.id, None)


def test_rounds_round_trip(store, task):
    _, task_id = task
    seed = store.start_round(task_id, 0, "seed")
    row = store.rounds(task_id)[0]
    assert (row.id, row.idx, row.branch, row.status, row.finished_at, row.state) == (seed, 0, "seed", "running",
                                                                                     None, None)
    store.finish_round(seed, "done", method="generate", note="3 seeds", outcome={"correct": 2},
                       state={"best": 1, "history": [{"round": 0}]})
    row = store.rounds(task_id)[0]
    assert (row.status, row.method, row.note, row.outcome, row.state) == (
        "done", "generate", "3 seeds", {"correct": 2}, {"best": 1, "history": [{"round": 0}]})
    assert row.finished_at >= row.started_at


def test_last_state_takes_the_latest_ended_round_with_a_state(store, task):
    _, task_id = task
    assert store.last_state(task_id) is None
    r0 = store.start_round(task_id, 0, "seed")
    store.finish_round(r0, "done", state={"at": 0})
    r1 = store.start_round(task_id, 1, "optimize")
    store.finish_round(r1, "failed", state={"at": 1})  # a failed round still leaves a usable state
    r2 = store.start_round(task_id, 2, "repair")
    store.finish_round(r2, "done")  # no state: skipped
    assert store.last_state(task_id) == (1, {"at": 1})

    store.start_round(task_id, 3, "optimize")  # left running by a crash
    r4 = store.start_round(task_id, 4, "optimize")
    store.finish_round(r4, "abandoned", state={"at": 4})
    assert store.last_state(task_id) == (1, {"at": 1})

    # a resumed run starts round 2 again: the latest round by id wins, not the highest index
    again = store.start_round(task_id, 2, "optimize")
    store.finish_round(again, "done", state={"at": "2 again"})
    assert store.last_state(task_id) == (2, {"at": "2 again"})

    other = store.add_task(store.latest_run().id, "other", "o.py", "o")
    assert store.last_state(other) is None


def test_abandon_unfinished_rounds(store, task):
    run_id, task_id = task
    done = store.start_round(task_id, 0, "seed")
    store.finish_round(done, "done", state={})
    store.start_round(task_id, 1, "optimize")
    store.start_round(task_id, 2, "repair")
    other = store.add_task(run_id, "other", "o.py", "o")
    elsewhere = store.start_round(other, 1, "optimize")

    assert store.abandon_unfinished_rounds(task_id) == 2
    assert [r.status for r in store.rounds(task_id)] == ["done", "abandoned", "abandoned"]
    assert all(r.finished_at is not None for r in store.rounds(task_id))
    assert store.rounds(other)[0].id == elsewhere and store.rounds(other)[0].status == "running"
    assert store.abandon_unfinished_rounds(task_id) == 0


def test_candidates_are_stored_and_written_to_files(store, task):
    _, task_id = task
    round_id = store.start_round(task_id, 0, "seed")
    source = "# é, ü: non-ASCII survives\nclass ModelNew:\n    pass\n"
    seed = store.add_candidate(task_id, round_id, "seed_0", source, origin="seed")
    assert (seed.task_id, seed.round_id, seed.label, seed.origin, seed.parent_id) == (task_id, round_id, "seed_0",
                                                                                      "seed", None)
    assert seed.path == "kernels/19_ReLU/seed_0.py"
    assert seed.sha256 == hashlib.sha256(source.encode()).hexdigest()
    child = store.add_candidate(task_id, None, "r1 / fused", "B\r\n", origin="optimize", parent_id=seed.id)
    assert child.path == "kernels/19_ReLU/r1___fused.py" and child.parent_id == seed.id

    assert store.candidates(task_id) == [seed, child] and store.candidate(child.id) == child
    for row in store.candidates(task_id):
        assert (store.run_dir / row.path).read_bytes() == row.source.encode("utf-8")  # byte for byte
    assert not [p for p in (store.run_dir / "kernels").rglob("*") if p.name.endswith(".tmp")]


def test_a_taken_label_fails_before_touching_its_file(store, task):
    _, task_id = task
    first = store.add_candidate(task_id, None, "seed_0", "original", origin="seed")
    with pytest.raises(sqlite3.IntegrityError):
        store.add_candidate(task_id, None, "seed_0", "impostor", origin="seed")
    assert (store.run_dir / first.path).read_text() == "original"
    assert len(store.candidates(task_id)) == 1


def test_file_names_are_sanitized_and_never_collide(store, task):
    run_id, task_id = task
    a = store.add_candidate(task_id, None, "a b", "1", origin="seed")
    b = store.add_candidate(task_id, None, "a/b", "2", origin="seed")  # sanitizes to the same name as "a b"
    assert (a.path, b.path) == ("kernels/19_ReLU/a_b.py", "kernels/19_ReLU/a_b-2.py")
    sneaky = store.add_task(run_id, "..", "x.py", "x")
    c = store.add_candidate(sneaky, None, "../../escape", "3", origin="seed")
    assert c.path == "kernels/_../_.._.._escape.py"
    assert (store.run_dir / c.path).resolve().is_relative_to((store.run_dir / "kernels").resolve())
    # a second run in the same folder with the same task and label gets its own file
    run2 = store.add_run("optimize", "fake:", {})
    again = store.add_candidate(store.add_task(run2, "19_ReLU", "p.py", "p"), None, "a b", "4", origin="seed")
    assert again.path == "kernels/19_ReLU/a_b-3.py"
    for row in (a, b, c, again):
        assert (store.run_dir / row.path).read_text() == row.source


def test_reviews_round_trip(store, task):
    _, task_id = task
    cand = store.add_candidate(task_id, None, "seed_0", "src", origin="seed")
    assert store.review_of(cand.id) is None
    failed = ReviewResult(compiled=False, correct=False, stage="compile", error="SyntaxError: line 3",
                          error_kind="compile_error", device="cpu", backend="triton").model_dump(mode="json")
    store.add_review(cand.id, failed)
    good = ReviewResult(compiled=True, correct=True, stage=None, error=None, device="cuda", backend="triton",
                        ref_ms=2.0, candidate_ms=1.0, speedup=2.0, compile_ms=1.5, speedup_vs_compile=1.5,
                        flags=["slow_first_call"], stage_seconds={"verify": 1.25}).model_dump(mode="json")
    review_id = store.add_review(cand.id, good)
    row = store.review_of(cand.id)  # the latest
    assert row.id == review_id and row.result == good
    assert (row.correct, row.compiled, row.stage, row.error_kind, row.error) == (True, True, None, None, None)
    assert (row.speedup, row.ref_ms, row.candidate_ms, row.compile_ms, row.speedup_vs_compile) == (2.0, 2.0, 1.0,
                                                                                                   1.5, 1.5)
    assert (row.flags, row.stage_seconds) == (["slow_first_call"], {"verify": 1.25})

    sparse = store.add_review(cand.id, {"correct": False, "compiled": True})  # missing keys are NULL
    row = store.review_of(cand.id)
    assert row.id == sparse and row.speedup is None and row.stage is None and row.flags == []
    with pytest.raises(ValueError, match="needs correct"):
        store.add_review(cand.id, {"compiled": True})


def test_profiles_round_trip(store, task):
    _, task_id = task
    cand = store.add_candidate(task_id, None, "seed_0", "src", origin="seed")
    assert store.profile_of(cand.id) is None
    store.add_profile(cand.id, {"ncu": None})
    latest = store.add_profile(cand.id, {"kernels": [{"name": "k", "dram_pct": 91.5}]})
    row = store.profile_of(cand.id)
    assert (row.id, row.candidate_id, row.evidence) == (latest, cand.id, {"kernels": [{"name": "k",
                                                                                      "dram_pct": 91.5}]})


def test_stage_totals_sum_reviews_and_profiles_of_the_task_only(store, task):
    run_id, task_id = task
    other = store.add_task(run_id, "20_LeakyReLU", "problems/20.py", PROBLEM)
    a = store.add_candidate(task_id, None, "seed_0", "src a", origin="seed")
    b = store.add_candidate(task_id, None, "seed_1", "src b", origin="seed")
    c = store.add_candidate(other, None, "seed_0", "src c", origin="seed")
    store.add_review(a.id, {"correct": True, "compiled": True,
                            "stage_seconds": {"queue": 1.0, "start": 4.0, "compile": 0.5, "verify": 1.0, "wall": 6.0}})
    store.add_review(b.id, {"correct": False, "compiled": True,
                            "stage_seconds": {"queue": 0.5, "prebuild": 3.0, "compile": 0.25, "wall": 1.0}})
    store.add_review(c.id, {"correct": True, "compiled": True, "stage_seconds": {"verify": 100.0}})
    store.add_profile(a.id, {"ncu": None}, seconds=7.5)
    store.add_profile(a.id, {"ncu": None})  # no seconds recorded: not counted
    store.add_profile(c.id, {"ncu": None}, seconds=50.0)
    assert store.stage_totals(task_id) == {"compile": 0.75, "prebuild": 3.0, "profile": 7.5, "queue": 1.5,
                                           "review_wall": 7.0, "start": 4.0, "verify": 1.0}
    assert store.profile_of(a.id).seconds is None and store.stage_totals(other) == {"profile": 50.0, "verify": 100.0}


def test_decisions_are_found_through_their_round_or_candidate(store, task):
    run_id, task_id = task
    round_id = store.start_round(task_id, 1, "optimize")
    cand = store.add_candidate(task_id, round_id, "r1", "src", origin="optimize")
    trace = {"bottleneck": "memory", "case": "elementwise", "allowed_methods": ["vectorize", "fuse"],
             "caveats": ["no ncu"]}
    by_round = store.add_decision(round_id, None, trace)
    by_candidate = store.add_decision(None, cand.id, {"bottleneck": "compute", "case": None, "allowed_methods": []})
    both = store.add_decision(round_id, cand.id, trace)
    other_task = store.add_task(run_id, "other", "o.py", "o")
    store.add_decision(store.start_round(other_task, 1, "optimize"), None, trace)

    rows = store.decisions(task_id)
    assert [r.id for r in rows] == [by_round, by_candidate, both]
    assert (rows[0].bottleneck, rows[0].case_id, rows[0].allowed, rows[0].decision) == (
        "memory", "elementwise", ["vectorize", "fuse"], trace)
    assert (rows[1].round_id, rows[1].candidate_id, rows[1].case_id) == (None, cand.id, None)
    with pytest.raises(ValueError, match="round_id or a candidate_id"):
        store.add_decision(None, None, trace)
    with pytest.raises(ValueError, match="needs a bottleneck"):
        store.add_decision(round_id, None, {"case": "x"})


def test_llm_calls_round_trip(store, task):
    run_id, task_id = task
    round_id = store.start_round(task_id, 1, "optimize")
    first = store.add_llm_call(**llm_call(run_id, None, round_idx=None, agent="curator"))
    second = store.add_llm_call(**llm_call(run_id, task_id, round_id=round_id, slot=2, agent="generator", attempt=2,
                                           reply=None,
                                           error="timed out after 3 attempts", cost_usd=None,
                                           tokens_estimated=True, attempts=3))
    rows = store.llm_calls(run_id=run_id)
    assert [r.id for r in rows] == [first, second]
    row = rows[1]
    assert (rows[0].round_id, row.round_id) == (None, round_id)
    assert (row.task_id, row.round_idx, row.slot, row.agent, row.attempt, row.reply, row.error) == (
        task_id, 1, 2, "generator", 2, None, "timed out after 3 attempts")
    assert (row.tokens_estimated, row.cost_usd, row.attempts, row.latency_s, row.model) == (
        True, None, 3, 0.5, "openai/gpt-4o")
    assert row.messages == llm_call(run_id)["messages"]
    assert [r.id for r in store.llm_calls(task_id=task_id)] == [second]
    assert store.llm_calls(run_id=run_id, task_id=task_id) == [row]
    assert len(store.llm_calls()) == 2


def test_llm_calls_accept_message_models(store, task):
    from kernelskill.llm.base import Message

    run_id, task_id = task
    store.add_llm_call(**llm_call(run_id, task_id, messages=[Message(role="user", content="hi")]))
    assert store.llm_calls(task_id=task_id)[0].messages == [{"role": "user", "content": "hi"}]


def test_llm_totals_count_unpriced_failed_and_estimated_calls(store, task):
    run_id, task_id = task
    empty = store.llm_totals(task_id)
    assert empty == {"calls": 0, "tokens": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
                     "unpriced_calls": 0, "failed_calls": 0, "estimated_calls": 0}
    store.add_llm_call(**llm_call(run_id, task_id, input_tokens=100, output_tokens=10, cost_usd=0.25))
    store.add_llm_call(**llm_call(run_id, task_id, input_tokens=200, output_tokens=20, cost_usd=0.5))
    store.add_llm_call(**llm_call(run_id, task_id, input_tokens=40, output_tokens=4, cost_usd=None,
                                  tokens_estimated=True))
    store.add_llm_call(**llm_call(run_id, task_id, input_tokens=0, output_tokens=0, cost_usd=None, reply=None,
                                  error="HTTP 500"))
    store.add_llm_call(**llm_call(run_id, None, input_tokens=10_000, cost_usd=9.0))  # not the task's
    assert store.llm_totals(task_id) == {"calls": 4, "tokens": 374, "input_tokens": 340, "output_tokens": 34,
                                         "cost_usd": 0.75, "unpriced_calls": 2, "failed_calls": 1,
                                         "estimated_calls": 1}


def test_everything_survives_reopening(tmp_path):
    with RunStore.create(tmp_path) as store:
        run_id = store.add_run("optimize", "fake:", {"x": 1})
        task_id = store.add_task(run_id, "t", "t.py", "src")
        round_id = store.start_round(task_id, 0, "seed")
        cand = store.add_candidate(task_id, round_id, "seed_0", "code", origin="seed")
        store.add_review(cand.id, {"correct": True, "compiled": True, "speedup": 1.5})
        store.finish_round(round_id, "done", state={"k": [1]})
        store.add_llm_call(**llm_call(run_id, task_id))
        before = (store.run(run_id), store.tasks(run_id), store.rounds(task_id), store.candidates(task_id),
                  store.review_of(cand.id), store.llm_calls(task_id=task_id))
    with RunStore.open(tmp_path) as store:
        after = (store.run(run_id), store.tasks(run_id), store.rounds(task_id), store.candidates(task_id),
                 store.review_of(cand.id), store.llm_calls(task_id=task_id))
    assert after == before


def test_rows_are_frozen(store, task):
    _, task_id = task
    with pytest.raises(Exception, match="frozen"):
        store.task(task_id).status = "finished"
