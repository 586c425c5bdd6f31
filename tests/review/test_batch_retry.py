"""A review whose batch left the candidate's claim unconfirmed by a busy host's hiccup is made again (fresh runners and
inputs), and what is kept of the two never raises a figure: judge_time.worth_retrying, verdict.keep_after_retry,
reviewer.review (docs/h200/timing, session 20: an honest 0.97x kernel put at 0.29x by 2.3 ms of the judge's latency)."""

from __future__ import annotations

import pytest

from kernelskill.review import judge, judge_time
from kernelskill.review.judge_time import RETRY_EXCESS_S, WALL_ABS_S, WALL_TOL, excess_s, worth_retrying
from kernelskill.review.results import JudgeBatch, ReviewResult
from kernelskill.review.verdict import keep_after_retry
from tests.conftest import run_review

P01 = "problems/p01_pointwise_gelu_chain.py"
TRITON = "candidates/p01_pointwise_gelu_chain/triton_ok.py"


def _batch(claimed_us: float, pace_us: float, calls: int = 341, confirmed: bool = False) -> JudgeBatch:
    return JudgeBatch(calls=calls, reference_calls=calls, reference_s={}, candidate_s={}, overhead_us=0.0,
                      reference_pace_us=claimed_us, candidate_pace_us=pace_us, claimed_us=claimed_us,
                      reference_events_us=claimed_us, confirmed=confirmed, fastest_confirmable_us=0.0)


def test_only_an_unconfirmed_claim_missed_by_a_hiccups_margin_is_worth_a_second_review():
    # session 20's L1/20: 341 calls claimed at 3.30 us, paced at 11.2 us by the judge's clock
    hiccup = _batch(3.30, 11.207)
    assert excess_s(hiccup) == pytest.approx(341 * (11.207 - 3.30 * (1 + WALL_TOL)) / 1e6 - WALL_ABS_S)
    assert worth_retrying(hiccup)
    # a fingerprint cache's misses: 20 ms a call against a claimed 0.1 ms
    assert not worth_retrying(_batch(100.0, 20_000.0, calls=50))
    assert not worth_retrying(_batch(3.30, 3.31, confirmed=True)) and excess_s(_batch(3.3, 3.31, confirmed=True)) == 0
    just_past = 3.30 * (1 + WALL_TOL) + (RETRY_EXCESS_S + WALL_ABS_S) * 1e6 / 341
    assert worth_retrying(_batch(3.30, just_past - 0.01)) and not worth_retrying(_batch(3.30, just_past + 0.01))


def _result(speedup: float | None, correct: bool = True, confirmed: bool = True) -> ReviewResult:
    return ReviewResult(device="cuda", backend="cuda", compiled=True, correct=correct, stage=None if correct else "time", speedup=speedup,
                        error=None if correct else "outputs differ", flags=["mine"], stage_seconds={"wall": 3.0},
                        judge_batch=_batch(3.3, 3.3 if confirmed else 9.0, confirmed=confirmed))


def test_what_is_kept_of_two_reviews_is_never_a_higher_figure_than_either_confirmed():
    first = _result(0.29, confirmed=False)
    kept = keep_after_retry(first, _result(0.97), 0.0023)
    assert kept.speedup == 0.97 and "confirmed them" in kept.flags[-1] and "2.3 ms" in kept.flags[-1]
    assert kept.stage_seconds["first_review"] == 3.0
    # unconfirmed twice: the lower figure, whichever review it came from
    assert keep_after_retry(_result(0.29, confirmed=False), _result(0.5, confirmed=False), 0.002).speedup == 0.29
    assert keep_after_retry(_result(0.8, confirmed=False), _result(0.5, confirmed=False), 0.002).speedup == 0.5
    # a failure in the second review is the verdict, however good the first looked
    failed = keep_after_retry(_result(5.0, confirmed=False), _result(None, correct=False), 0.002)
    assert not failed.correct and failed.speedup is None and "failed" in failed.flags[-1]


def _hiccup_first(monkeypatch, past_s: float) -> list[bool]:
    """The judge's clock sees the candidate's first batch `past_s` beyond what confirms its claim, and every later
    batch exactly at its claim: returns whether each batch was confirmed."""
    real, seen = judge.bound_timing, []

    def clocked(timing, ref, walls, calls):
        batch = real(timing, ref, walls, calls)[2]
        fitted = batch.overhead_us / 1e6 + calls * batch.claimed_us / 1e6
        if not seen:
            fitted += calls * batch.claimed_us / 1e6 * WALL_TOL + WALL_ABS_S + past_s
        bounded = real(timing, ref, {**walls, "calls": fitted}, calls)
        seen.append(bounded[2].confirmed)
        return bounded

    monkeypatch.setattr(judge, "bound_timing", clocked)
    monkeypatch.setattr(judge_time, "RETRY_DEVICES", {"cuda", "cpu"})  # (on a GPU only, where batches are short)
    return seen


def test_a_batch_missed_by_a_hiccup_is_reviewed_again_and_the_second_figure_kept(tmp_path, monkeypatch):
    seen = _hiccup_first(monkeypatch, 0.005)
    result = run_review(P01, TRITON, tmp_path, rules="kernelbench")
    assert result.correct, result.error
    assert seen == [False, True]
    retried = [f for f in result.flags if f.startswith("timing_retried")]
    assert retried and "confirmed them" in retried[0], result.flags
    assert result.judge_batch.confirmed and not any(f.startswith("timing_unconfirmed") for f in result.flags)
    assert (tmp_path / "retry" / "worker.log").is_file() and result.stage_seconds["first_review"] > 0


@pytest.mark.parametrize("past_s, retries", [(RETRY_EXCESS_S + 0.03, 1), (0.005, 0)])
def test_a_batch_missed_by_more_than_a_hiccup_or_with_retries_off_is_not_reviewed_again(tmp_path, monkeypatch,
                                                                                        past_s, retries):
    seen = _hiccup_first(monkeypatch, past_s)
    result = run_review(P01, TRITON, tmp_path, rules="kernelbench", batch_retries=retries)
    assert result.correct, result.error
    assert seen == [False]
    assert any(f.startswith("timing_unconfirmed") for f in result.flags), result.flags
    assert not any(f.startswith("timing_retried") for f in result.flags) and not (tmp_path / "retry").exists()


def test_a_runner_whose_timing_samples_are_unusable_is_rejected_not_a_crash(tmp_path, monkeypatch):
    # what a runner says of its timing is parsed on this side: samples that are not all finite and positive leave
    # the judge nothing to bound, and that is the candidate's verdict, never an exception out of the review
    real = judge.candidate_part

    def forged(worker, ref, folder, atol, rtol, limits, runner_timing, *args, **kwargs):
        bad = runner_timing.model_copy(update={"candidate": runner_timing.candidate.model_copy(
            update={"samples_ms": [float("nan")] * len(runner_timing.candidate.samples_ms)})})
        return real(worker, ref, folder, atol, rtol, limits, bad, *args, **kwargs)

    monkeypatch.setattr(judge, "candidate_part", forged)
    result = run_review(P01, TRITON, tmp_path, rules="kernelbench")
    assert not result.correct and result.error_kind == "rejected", (result.error_kind, result.error)
    assert result.checks[0].name == "judge:timing-samples" and result.speedup is None
