"""How long the device sat idle while the build of the candidate it reviews next was running (issue 33): the stage
`gpu_wait` of that review, summed per task with the other stages (RunStore.stage_totals) and shown with them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kernelskill.loop.evaluator import LocalEvaluator
from kernelskill.review.results import ReviewResult
from kernelskill.review.reviewer import Prebuilt

PROBLEM = Path("problem.py")


def _review(problem, candidate, settings, log_dir=None, env=None) -> ReviewResult:
    time.sleep(candidate)  # the "candidate" here is how long its review holds the device
    return ReviewResult(device="cpu", backend="cuda", compiled=True, correct=True, stage=None, error=None,
                        stage_seconds={"compile": 0.01})


def _prebuild(problem, candidate, settings, log_dir) -> Prebuilt:
    time.sleep(0.3)
    return Prebuilt(seconds=0.3)


def test_the_device_idle_during_the_candidates_build_is_its_reviews_gpu_wait(tmp_path):
    evaluator = LocalEvaluator("cpu", reviewer=_review, prebuilder=_prebuild)
    evaluator.prebuild(PROBLEM, 0.0, None, tmp_path / "a")
    waited = evaluator.review(PROBLEM, 0.0, None, tmp_path / "a").stage_seconds["gpu_wait"]
    assert 0.29 <= waited < 0.6  # the device was idle through the whole build

    # another review holds the device through the next build: the GPU did not wait on it
    holder = threading.Thread(target=evaluator.review, args=(PROBLEM, 0.5, None, tmp_path / "busy"))
    holder.start()
    time.sleep(0.05)
    evaluator.prebuild(PROBLEM, 0.0, None, tmp_path / "b")
    holder.join()
    assert "gpu_wait" not in evaluator.review(PROBLEM, 0.0, None, tmp_path / "b").stage_seconds

    # no build in this thread before the review: nothing to wait on
    assert "gpu_wait" not in evaluator.review(PROBLEM, 0.0, None, tmp_path / "c").stage_seconds
