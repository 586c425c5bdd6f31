"""The speed of light in a review (review/sol.py): the floor, the share of it a candidate reaches, and the one
verdict it gives. On real CUDA-L1 kernels (scripts/sol_check.py over the H200 run) no reference was faster than its
floor, and the two correct kernels that were (a diagonal matrix product done as a row scaling, a conv whose output
a clamp makes constant) do less work than the reference's algorithm: only the output-writing floor can reject."""

import pytest

from kernelskill.problem import read_problem
from kernelskill.review import sol
from kernelskill.review.results import TimingResult, TimingStats
from kernelskill.review.roofline import hard_floor_ms
from kernelskill.review.work import ProblemWork, measure_problem_work
from tests.conftest import DATA

P01 = DATA / "problems" / "p01_pointwise_gelu_chain.py"
# 256 MB in and out, no matrix products: the H200's floor is 512 MB / 4.8 TB/s = 0.107 ms
WORK = ProblemWork(source="test", flops=0.0, bytes=512e6, output_bytes=256e6, precision="fp32")


def timed(candidate_ms: float) -> TimingResult:
    ref, cand = TimingStats.from_samples([1.0] * 10), TimingStats.from_samples([candidate_ms] * 10)
    return TimingResult(clock="cuda_events", method="test", warmup=1, iters=10, reference=ref, candidate=cand,
                        speedup=1.0 / candidate_ms, speedup_median=1.0 / candidate_ms)


@pytest.fixture
def work(monkeypatch):
    monkeypatch.setattr(sol, "problem_work", lambda problem: WORK)


def judged(candidate_ms: float, device: str = "cuda", gpu: str = "NVIDIA H200") -> dict:
    result = {"device": device, "device_name": gpu, "timing": timed(candidate_ms), "stage": None, "correct": True,
              "flags": [], "checks": []}
    sol.judge(result, read_problem(P01))
    return result


def test_the_hard_floor_counts_only_outputs_that_cannot_stay_in_l2():
    assert hard_floor_ms(256e6, "h200") == pytest.approx((256e6 - 60e6) / 4.8e12 * 1e3)
    assert hard_floor_ms(50e6, "h200") == 0.0  # fits in L2: no floor at all
    assert hard_floor_ms(256e6, "cpu") is None


def test_a_candidate_faster_than_writing_its_outputs_is_rejected(work):
    result = judged(0.01)  # 10 us for 196 MB that must reach DRAM (>= 41 us)
    assert result["stage"] == "time" and result["error_kind"] == "rejected" and not result["correct"]
    assert "runtime:impossible-time" in result["error"] and "MB of outputs" in result["error"]
    assert result["speed_of_light"].hard_floor_ms == pytest.approx(0.0408, rel=1e-2)


def test_a_candidate_below_the_reference_floor_is_flagged_not_rejected(work):
    result = judged(0.06)  # above the hard floor (41 us), below the reference's floor (107 us)
    assert result["stage"] is None and result["correct"]
    assert any(f.startswith("below_reference_floor") for f in result["flags"])
    assert result["speed_of_light"].pct_of_sol == pytest.approx(0.10667 / 0.06 * 100, rel=1e-3)


def test_an_ordinary_candidate_gets_its_share_of_the_floor(work):
    result = judged(1.0667)
    assert result["stage"] is None and not result["flags"]
    assert result["speed_of_light"].sol_ms == pytest.approx(0.10667, rel=1e-3)
    assert result["speed_of_light"].pct_of_sol == pytest.approx(10.0, rel=1e-3)


def test_no_floor_without_a_gpu_in_the_table(work):
    assert "speed_of_light" not in judged(0.01, device="cpu")
    unknown = judged(0.01, gpu="NVIDIA GeForce RTX 2080")
    assert unknown["stage"] is None and unknown["speed_of_light"].sol_ms is None
    assert "no peak figures" in unknown["speed_of_light"].note


def test_the_outputs_a_problem_writes_are_counted():
    work = measure_problem_work(P01)
    assert work.output_bytes is not None and 0 < work.output_bytes < work.bytes, work.note
