"""Warm review workers: one process serves review after review, and is replaced whenever it may not be clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_review as _run_review


def run_review(*args, **settings):
    """Warm workers serve the runner-only path (Guards.judge=False): the judge never lets a candidate's runner
    serve another review (tests/review/test_trust_boundary.py)."""
    from kernelskill.settings import Guards

    guards = {**settings.pop("guards", {}), "judge": False}
    return _run_review(*args, guards=Guards(**guards), **settings)

P01 = "problems/p01_pointwise_gelu_chain.py"
OK = "candidates/p01_pointwise_gelu_chain/triton_ok.py"


@pytest.fixture
def pool():
    from kernelskill.review.sandbox import POOL

    POOL.close()  # start from no idle worker
    yield POOL
    POOL.spares = 0
    POOL.close()


def test_a_warm_worker_serves_the_next_review_of_its_source_and_no_other(tmp_path, pool):
    first = run_review(P01, OK, tmp_path / "a")
    assert first.correct and first.stage_seconds["start"] > 0  # a fresh worker: Python, torch and the device set up
    idle = pool.idle_pids()
    assert len(idle) == 1
    again = run_review(P01, OK, tmp_path / "b")
    assert again.correct and again.stage_seconds["start"] == 0.0
    assert pool.idle_pids() == idle  # the same process served both
    # another source gets a runner of its own (its caches are its own: review/caches.py)
    wrong = run_review(P01, "candidates/broken/wrong_result.py", tmp_path / "c")
    assert wrong.error_kind == "mismatch" and wrong.stage_seconds["start"] > 0
    assert len(pool.idle_pids()) == 2 and idle[0] in pool.idle_pids()
    # (no comparison of wall times: a fresh runner forks from the zygote in tens of milliseconds, less than a
    # loaded machine's noise; what the warm worker saves is its start-up, which is 0 above)


def test_a_crash_or_rejection_retires_the_worker(tmp_path, pool):
    crashed = run_review(P01, "candidates/broken/crash.py", tmp_path / "a")
    assert crashed.error_kind == "crash" and pool.idle_pids() == []
    run_review(P01, OK, tmp_path / "b")
    (warm,) = pool.idle_pids()
    rejected = run_review(P01, "cheats/patch_hidden.py", tmp_path / "c")
    assert rejected.error_kind == "rejected" and pool.idle_pids() == [warm]  # its own worker retired, not kept


def test_a_candidate_that_changed_torch_does_not_leave_it_changed_for_the_next(tmp_path, pool):
    """With static checks off, a candidate halves F.gelu; the next review must still see the real reference."""
    cheat = run_review(P01, "cheats/patch_reference_op.py", tmp_path / "a",
                       guards={"static_checks": False})
    assert not cheat.correct
    honest = run_review(P01, OK, tmp_path / "b")
    assert honest.correct, honest.error
    assert honest.stage_seconds["start"] > 0  # in a fresh worker
    assert "torch.nn.functional.gelu" in Path(cheat.log_path).read_text()  # the log says why the worker was retired


def test_reuse_can_be_turned_off(tmp_path, pool):
    run_review(P01, OK, tmp_path / "a", reuse_worker=False)
    assert pool.idle_pids() == []


def test_a_spare_worker_takes_the_next_review_without_its_start_up(tmp_path, pool):
    """With spares on (an evaluator on a GPU sets them), a candidate's runner is started ahead while its review
    waits in line (reviewer.warm_runner): the start-up runs beside the review before, not inside this one. Fails
    without the spares."""
    import time

    from kernelskill.candidate import read_candidate
    from kernelskill.review.reviewer import warm_runner
    from kernelskill.settings import Guards, ReviewSettings
    from tests.conftest import DATA

    pool.spares = 1
    settings = ReviewSettings(device="cpu", guards=Guards(judge=False))
    assert warm_runner(DATA / P01, read_candidate(DATA / OK, None), settings)
    (spare,) = pool.spare_pids()
    assert not warm_runner(DATA / P01, read_candidate(DATA / "candidates/broken/crash.py", None), settings)  # at most
    time.sleep(5)  # the spare finishes starting meanwhile, as it would beside a review holding the GPU
    ok = run_review(P01, OK, tmp_path / "b")
    assert ok.correct, ok.error
    assert ok.stage_seconds["start"] < 1.0  # only the wait for its ready message
    assert pool.idle_pids() == [spare]  # the spare served it and, clean, stays warm
    assert pool.spare_pids() == []  # none started for that source again: no other review can take one


def test_spares_are_for_reviewing_again(tmp_path, pool):
    """A plain review keeps no spare; an evaluator on a GPU turns spares on and its close takes them away."""
    from kernelskill.loop.evaluator import SPARES_PER_GPU, LocalEvaluator

    run_review(P01, OK, tmp_path / "a")
    assert pool.spare_pids() == []
    evaluator = LocalEvaluator("cuda")
    assert pool.spares == SPARES_PER_GPU
    evaluator.close()
    assert pool.spares == 0 and pool.spare_pids() == []
    assert LocalEvaluator("cpu") and pool.spares == 0
