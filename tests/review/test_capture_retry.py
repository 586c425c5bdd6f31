"""A review that failed after its candidate runner's graph capture failed with a CUDA error is made again, in fresh
runners with the candidate's calls launched one by one, and that review's verdict is kept (verdict.after_failed_capture,
reviewer.review). On the H100, CUDA-L1's L1/32 HardTanh, correct in every earlier run, got other calls' values on
the judge's trials after a capture of its calls failed half-way (docs/h200/kernelbench, session 23). The runner's
failure is played here by the judge's part of the first review; the second review is real."""

from __future__ import annotations

from kernelskill.review import judge, reviewer
from kernelskill.review.verdict import after_failed_capture
from tests.conftest import run_review

P01 = "problems/p01_pointwise_gelu_chain.py"
TRITON = "candidates/p01_pointwise_gelu_chain/triton_ok.py"
FAILED = ("; the graphed protocol's capture was not used (the candidate's calls: one call captured alone: "
          "AcceleratorError: CUDA error: operation failed due to a previous error during capture): calls launched "
          "one by one")


def test_only_a_capture_that_failed_with_a_cuda_error_earns_a_second_look():
    assert after_failed_capture("up to 25 warm-up + 100 timed samples" + FAILED)
    # a candidate that replays CUDA graphs of its own cannot be captured, and its runner is left sound (L1/67, L2/41)
    assert not after_failed_capture("...; the graphed protocol's capture was not used (the candidate's calls: "
                                     "RuntimeError: Cannot prepare for replay during capturing): calls launched one by one")
    assert not after_failed_capture("...; each sample's calls replayed from a CUDA graph of them") and not after_failed_capture(None)
    # the time stage itself failed after a capture: the runner's verdict is all there is
    assert after_failed_capture(None, "CUDA error while running the candidate: forward: AcceleratorError: CUDA error: "
                                      "operation failed due to a previous error during capture")
    assert not after_failed_capture(None, "CUDA error while running the candidate: an illegal memory access")


def _first_review_broken(monkeypatch, verdict: str = "mismatch") -> tuple[list[int], list[tuple[str, str]]]:
    real_part, real_run, parts, requests = judge.candidate_part, reviewer.run_worker, [], []

    def recording(request, *args, **kwargs):
        requests.append((request.mode, request.settings.timing_protocol))
        return real_run(request, *args, **kwargs)

    def broken_first(worker, ref, folder, atol, rtol, limits, runner_timing, *args, **kwargs):
        parts.append(len(parts) + 1)
        if len(parts) == 1:  # the runner said its capture failed, then gave the judge's trials other calls' values
            runner_timing.method += FAILED
            worker.kill()
            return judge._fail(judge.JudgeReport(), verdict, "judge's trial on fresh inputs: other calls' values")
        return real_part(worker, ref, folder, atol, rtol, limits, runner_timing, *args, **kwargs)

    monkeypatch.setattr(reviewer, "run_worker", recording)
    monkeypatch.setattr(judge, "candidate_part", broken_first)
    return parts, requests


def test_a_review_that_failed_after_a_failed_capture_is_judged_again_with_its_calls_launched_one_by_one(
        tmp_path, monkeypatch):
    parts, requests = _first_review_broken(monkeypatch)
    result = run_review(P01, TRITON, tmp_path, rules="kernelbench")
    assert result.correct, result.error
    assert parts == [1, 2]
    said = [f for f in result.flags if f.startswith("graph_capture_retried")]
    assert said and "mismatch: judge's trial on fresh inputs" in said[0], result.flags
    # the reference runner keeps the protocol (its graph stays the candidate's bar); the candidate's second runner
    # launches its calls one by one
    assert requests == [("reference", "graphed"), ("review", "graphed"), ("reference", "graphed"), ("review", "robust")]
    assert (tmp_path / "eager" / "worker.log").is_file() and result.stage_seconds["first_review"] > 0


def test_a_second_review_is_made_once_and_its_failure_is_the_verdict(tmp_path, monkeypatch):
    parts, requests = _first_review_broken(monkeypatch)

    def always_broken(worker, ref, folder, atol, rtol, limits, runner_timing, *args, **kwargs):
        parts.append(len(parts) + 1)
        runner_timing.method += FAILED
        worker.kill()
        return judge._fail(judge.JudgeReport(), "mismatch", f"judge's trial on fresh inputs: wrong, review {len(parts)}")

    monkeypatch.setattr(judge, "candidate_part", always_broken)
    result = run_review(P01, TRITON, tmp_path, rules="kernelbench")
    assert not result.correct and result.error_kind == "mismatch" and "wrong, review 2" in result.error
    assert parts == [1, 2] and len(requests) == 4
    assert any(f.startswith("graph_capture_retried") for f in result.flags)


def test_a_candidate_a_named_check_rejected_gets_no_second_review(tmp_path, monkeypatch):
    # a runner may say its capture failed whatever happened: a rejection stands, with no second draw of the
    # judge's secret picks and samples
    parts, requests = _first_review_broken(monkeypatch, verdict="rejected")
    result = run_review(P01, TRITON, tmp_path, rules="kernelbench")
    assert not result.correct and result.error_kind == "rejected" and parts == [1] and len(requests) == 2
    assert not any(f.startswith("graph_capture_retried") for f in result.flags) and not (tmp_path / "eager").exists()


def test_a_time_stage_that_failed_after_a_capture_is_judged_again(tmp_path, monkeypatch):
    # where the eager calls after a failed capture raise, the runner's own verdict is the only word of it
    from kernelskill.review.wire import VerdictMessage

    real_run, requests = reviewer.run_worker, []

    def crashed_first(request, *args, **kwargs):
        requests.append((request.mode, request.settings.timing_protocol))
        outcome = real_run(request, *args, **kwargs)
        if request.mode == "review" and len(requests) == 2:
            outcome.worker.kill()
            outcome.awaiting, outcome.worker = False, None
            outcome.verdict = VerdictMessage(stage="time", kind="crash", error=(
                "CUDA error while running the candidate: forward: AcceleratorError: CUDA error: operation failed "
                "due to a previous error during capture"))
        return outcome

    monkeypatch.setattr(reviewer, "run_worker", crashed_first)
    result = run_review(P01, TRITON, tmp_path, rules="kernelbench")
    assert result.correct, result.error
    assert requests == [("reference", "graphed"), ("review", "graphed"), ("reference", "graphed"), ("review", "robust")]
    said = [f for f in result.flags if f.startswith("graph_capture_retried")]
    assert said and "crash: CUDA error while running the candidate" in said[0], result.flags
