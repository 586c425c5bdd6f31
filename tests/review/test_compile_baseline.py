"""The compile baseline (`--baseline compile`): torch.compile(Model) timed beside the candidate, compiled before the
timed loop, and warmed into Inductor's cache ahead of the reviews (bench), on CPU (Inductor's C++ backend)."""

from __future__ import annotations

import pytest

from tests.conftest import DATA, fast_settings, run_review

P01 = "problems/p01_pointwise_gelu_chain.py"
TRITON = "candidates/p01_pointwise_gelu_chain/triton_ok.py"

pytestmark = pytest.mark.slow  # Inductor compiles C++ on the CPU: about 20 s a cold compile


@pytest.fixture
def fresh_inductor_cache(tmp_path, monkeypatch):
    """An Inductor cache of this test's own: every compile is cold unless the test warmed it."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))


def test_the_compile_is_made_before_the_timed_loop_so_no_side_loses_samples(tmp_path, fresh_inductor_cache):
    # Compiled on its first warm-up call, torch.compile's seconds counted as a warm-up call's cost: the loop's
    # budget then cut every side to the minimum of 10 samples.
    result = run_review(P01, TRITON, tmp_path, baseline="compile", warmup=2, iters=30)
    assert result.correct, result.error
    timing = result.timing
    assert timing.iters == 30
    assert len(timing.compiled_reference.samples_ms) == len(timing.candidate.samples_ms) == 30
    assert timing.compile_warmup is not None and timing.compile_warmup.seconds > 0
    assert timing.compile_warmup.fxgraph_cache_miss >= 1  # a cold cache: compiled here
    assert "torch.compile(Model) was called once before the loop" in timing.method
    assert result.compile_ms and result.speedup_vs_compile


def test_a_warm_up_fills_inductors_cache_for_the_review(tmp_path, fresh_inductor_cache):
    from kernelskill.review.reviewer import warm_compile

    warmed = warm_compile(DATA / P01, fast_settings(), tmp_path / "warm")
    assert warmed.error is None and warmed.warmup is not None
    assert warmed.warmup.fxgraph_cache_miss >= 1
    assert "sandbox:" in (tmp_path / "warm" / "warm.log").read_text()  # its worker's log, as a review's

    result = run_review(P01, TRITON, tmp_path / "review", baseline="compile")
    assert result.correct, result.error
    # the review built and called the reference exactly as the warm-up did, in the same caches: nothing to compile
    assert result.timing.compile_warmup.fxgraph_cache_hit >= 1
    assert result.timing.compile_warmup.fxgraph_cache_miss == 0


def test_a_compile_that_fails_costs_the_baseline_not_the_candidate(tmp_path, fresh_inductor_cache):
    from kernelskill.review.reviewer import warm_compile

    problem = "problems/special/c01_inductor_cannot_build.py"
    result = run_review(problem, TRITON, tmp_path, baseline="compile", reuse_worker=False)
    assert result.correct, result.error
    assert result.compile_ms is None and result.speedup_vs_compile is None and result.speedup
    said = [f for f in result.flags if f.startswith("compile_baseline_failed")]
    assert said and "torch.compile(Model) raised" in said[0], result.flags
    assert "Traceback" in (tmp_path / "worker.log").read_text()  # the compiler's own words are in the log

    warmed = warm_compile(DATA / problem, fast_settings(reuse_worker=False), tmp_path / "warm")
    assert warmed.warmup is None and "torch.compile(Model) failed" in warmed.error
