"""The problem's speed of light (review/roofline.py, review/work.py) and how it sets the headroom tier (issue 16)."""

from __future__ import annotations

import pytest

from kernelskill.review.work import ProblemWork
from kernelskill.memory.policy.decide import decide
from kernelskill.review.work import measure_problem_work
from kernelskill.review.roofline import compute_precision, find_gpu, floor_ms
from memhelpers import make_evidence

MATMUL_PROBLEM = """import torch
import torch.nn as nn
M = K = N = 256


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, a, b):
        return torch.relu(a @ b + self.bias)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return [N]
"""


def test_floor_is_the_slower_of_compute_and_memory():
    # 2 GFLOP at H200's TF32 peak (494.7 TFLOP/s) = 4.34 us; 12 MB at 4.8 TB/s = 2.6 us -> compute-bound
    assert floor_ms(2 * 1024**3, 12 * 2**20, "tf32", "h200") == pytest.approx(2 * 1024**3 / 494.7e12 * 1e3)
    # the same bytes with almost no math: memory-bound
    assert floor_ms(1e3, 512e6, "fp32", "NVIDIA H200") == pytest.approx(512e6 / 4.8e12 * 1e3)
    assert floor_ms(1e12, 0, "bf16", "h200") < floor_ms(1e12, 0, "tf32", "h200") < floor_ms(1e12, 0, "fp32", "h200")


def test_gpu_table_and_unknowns():
    assert find_gpu("NVIDIA H200").id == "h200" and find_gpu("NVIDIA H100 80GB HBM3").id == "h100_sxm"
    assert find_gpu("NVIDIA H100 PCIe").id == "h100_pcie" and find_gpu("A100-SXM4-80GB").id == "a100_sxm"
    assert find_gpu("NVIDIA GeForce RTX 4090") is None and find_gpu(None) is None
    assert floor_ms(1e9, 1e9, "fp32", "RTX 4090") is None  # not in the table: unknown, never a guess
    assert floor_ms(1e9, 1e9, "fp8", "a100_sxm") is None  # no FP8 on an A100
    h100 = floor_ms(0, 1e9, "fp32", "h100_sxm")
    assert h100 == pytest.approx(1e9 / 3.35e12 * 1e3) and h100 > floor_ms(0, 1e9, "fp32", "h200")
    with pytest.raises(ValueError):
        floor_ms(1, 1, "int4", "h200")


def test_compute_precision():
    assert compute_precision("torch.float32", has_matmul=True) == "tf32"
    assert compute_precision("float32", has_matmul=False) == "fp32"
    assert compute_precision("torch.bfloat16", has_matmul=True) == "bf16"
    assert compute_precision("torch.float16", has_matmul=False) == "fp16"


def test_problem_work_counts_flops_and_bytes_on_the_meta_device(tmp_path):
    p = tmp_path / "mm.py"
    p.write_text(MATMUL_PROBLEM)
    w = measure_problem_work(p)
    assert w.note and w.flops == 2 * 256**3 and w.precision == "tf32"
    assert w.bytes == 4 * (256 * 256 * 3 + 256)  # a, b, the output and the bias, once each


def test_problem_work_failure_is_unknown_with_the_reason(tmp_path):
    p = tmp_path / "cuda_inputs.py"
    p.write_text(MATMUL_PROBLEM.replace("torch.randn(M, K)", "torch.randn(M, K, device='cpu')"))
    w = measure_problem_work(p)
    assert w.flops is None and w.bytes is None and "device explicitly" in w.note
    missing = measure_problem_work(tmp_path / "nope.py")
    assert missing.flops is None and "no such problem file" in missing.note


def busy_but_slow(kb, forward_ms):
    """A kernel whose busiest unit runs at 80 % (tier L by that alone) - a serial softmax's picture."""
    ev = make_evidence(kb, fields={"sm_throughput_pct": 80, "memory_throughput_pct": 30}, code={})
    if forward_ms is not None:
        ev.problem = ProblemWork(source="test", flops=0, bytes=256e6, precision="fp32", gpu="h200",
                                 forward_ms=forward_ms)  # fmt: skip
    return decide(kb, ev)


def test_a_kernel_far_from_its_floor_has_high_headroom_whatever_its_busiest_unit(kb):
    d = busy_but_slow(kb, forward_ms=13.3)  # floor 256 MB / 4.8 TB/s = 0.0533 ms: the kernel is at 0.4 %
    derived = {x.id: x for x in d.derived}
    assert derived["pct_of_floor"].value == pytest.approx(100 * 0.05333 / 13.3, rel=1e-3)
    assert derived["max_gain_x"].value == pytest.approx(13.3 / 0.05333, rel=1e-3)
    assert d.tier == "H" and d.tier_trace.limiter == "headroom_pct"
    assert d.predicates["near_roofline"].state == "false" and d.predicates["far_from_floor"].state == "true"
    runs = {f.id: f for f in d.run_features}
    assert runs["sol_ms"].source == "problem" and runs["forward_ms"].source == "problem"


def test_without_the_problem_the_floor_is_unknown_and_the_busiest_unit_sets_the_tier(kb):
    d = busy_but_slow(kb, forward_ms=None)
    derived = {x.id: x for x in d.derived}
    assert derived["pct_of_floor"].state == "unknown" and derived["pct_of_floor"].missing == ["sol_ms"]
    assert d.predicates["far_from_floor"].state == "unknown"  # unknown, not false
    assert d.tier == "L" and "sol_ms" in d.missing


def test_forward_time_falls_back_to_ncu_as_a_lower_bound(kb):
    ev = make_evidence(kb, fields={"kernel_time_ns": 2_000_000}, code={})
    ev.problem = ProblemWork(source="test", flops=0, bytes=4.8e9, precision="fp32", gpu="h200")  # 1 ms floor
    d = decide(kb, ev)
    runs = {f.id: f for f in d.run_features}
    assert runs["forward_ms"].source == "ncu" and runs["forward_ms"].value == pytest.approx(2.0)
    assert next(x for x in d.derived if x.id == "pct_of_floor").value == pytest.approx(50.0)


def test_the_gpu_comes_from_the_ncu_report_when_the_problem_does_not_name_it(kb):
    from kernelskill.profiling.ncu import MetricValue

    ev = make_evidence(kb, fields={}, code={})
    ev.problem = ProblemWork(source="test", flops=0, bytes=4.8e9, precision="fp32")
    assert {f.id: f for f in decide(kb, ev).run_features}["sol_ms"].status == "missing"  # no GPU named anywhere
    ev.ncu.kernels[0].metrics["device__attribute_display_name"] = MetricValue(value="NVIDIA H200", unit="")
    assert {f.id: f for f in decide(kb, ev).run_features}["sol_ms"].value == pytest.approx(1.0)


def test_gain_estimates_are_capped_by_the_headroom_the_floor_leaves(kb):
    code = {"gemm_like": True, "naive_gemm": True, "has_k_loop": True}
    ev = make_evidence(kb, fields={}, code=code)
    free = decide(kb, ev).ranking[0]
    assert (free.method, free.gain, free.capped) == ("shared_memory_tiling", 6.0, False)  # no floor: the prior
    ev.problem = ProblemWork(source="test", flops=2e12, bytes=0, precision="tf32", gpu="h200",
                             forward_ms=2e12 / 494.7e12 * 1e3 * 2)  # fmt: skip  (at 50 % of the floor)
    ranking = decide(kb, ev).ranking
    assert [r.gain for r in ranking[:3]] == pytest.approx([2.0, 2.0, 2.0]) and all(r.capped for r in ranking[:3])
    assert [r.method for r in ranking] == ["shared_memory_tiling", "register_blocking", "tensor_cores",
                                           "use_vendor_library"]  # ties keep the case's order
