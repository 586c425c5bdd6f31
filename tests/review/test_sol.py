"""The speed of light in a review (review/sol.py): the floor, the share of it a candidate reaches, and the one
verdict it gives. On real CUDA-L1 kernels (scripts/sol_check.py over the H200 run) no reference was faster than its
floor, and two correct kernels were: L1/12 does a diagonal matrix product as a row scaling (less work than the
reference's algorithm: flagged, not rejected), L2/83 returns one zero tensor it allocated in __init__ on every call
(its reference's clamp makes the output zero), in 8 us, under the 9 us writing 128 MB takes: rejected."""

from types import SimpleNamespace

import pytest

from kernelskill.problem import read_problem
from kernelskill.review import sol
from kernelskill.review.results import TimingResult, TimingStats
from kernelskill.review.roofline import hard_floor_ms
from kernelskill.review.rules import RuleSet
from kernelskill.review.verdict import Seen, decide
from kernelskill.review.wire import StageResults
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


def judged(candidate_ms: float, device: str = "cuda", gpu: str = "NVIDIA H200", stored: int | None = None) -> dict:
    """The verdict (review/verdict.py) on a run that went through with this timing, as the reviewer decides it."""
    outcome = SimpleNamespace(results=StageResults(timing=timed(candidate_ms)), verdict=None, timed_out=False,
                              awaiting=False, finished=True, stage=None)
    problem = read_problem(P01)
    floor = (lambda timing: sol.assess(timing, problem, gpu, stored)) if device == "cuda" else None
    verdict = decide(Seen(outcome=outcome), RuleSet.of("kernelbench"), "triton", [], floor=floor)
    return {k: v for k, v in verdict.fields().items() if not (k == "speed_of_light" and v is None)}


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


def test_an_output_that_is_a_broadcast_view_writes_almost_nothing_and_is_not_impossible(work):
    # a problem whose output is one value may be answered with torch.zeros(1).expand(shape): 4 bytes written
    result = judged(0.01, stored=4)
    assert result["stage"] is None and result["correct"]
    assert result["speed_of_light"].hard_floor_ms == 0.0 and result["speed_of_light"].output_bytes == 4
    assert judged(0.01, stored=256_000_000)["error_kind"] == "rejected"


def test_stored_bytes_counts_what_outputs_occupy():
    import torch

    from kernelskill.review.worker.verify import stored_bytes

    plain = torch.zeros(64, 32)
    assert stored_bytes(plain, torch) == 64 * 32 * 4
    assert stored_bytes(torch.zeros(1).expand(64, 32), torch) == 4  # a broadcast view of one value
    assert stored_bytes(torch.zeros(1000, 32)[:64], torch) == 64 * 32 * 4  # a slice: its elements, not the buffer
    assert stored_bytes((plain, [plain[:1], 3]), torch) == 64 * 32 * 4 + 32 * 4


def test_a_forward_that_reads_values_has_its_work_counted_on_the_cpu(tmp_path):
    # KernelBench's SwinMLP and SwinTransformerV2 call .item() in forward, which the meta device cannot answer:
    # their floor was unknown; the work is now counted on the CPU instead (said so in the note)
    problem = tmp_path / "reads_values.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(64, 32)\n\n"
        "    def forward(self, x):\n        shift = int(x.abs().max().item() > -1)\n"
        "        return self.fc(torch.roll(x, shift, 0))\n\n\n"
        "def get_inputs():\n    return [torch.randn(16, 64)]\n\n\ndef get_init_inputs():\n    return []\n")
    work = measure_problem_work(problem)
    assert work.flops == 2 * 16 * 64 * 32 and "on the CPU" in work.note
    assert work.bytes == 4 * (16 * 64 + 16 * 32 + 64 * 32 + 32)
