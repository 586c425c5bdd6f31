"""Serial work per thread (code_serial.py) and what the policy makes of it: LLM kernels that walk rows alone get
parallel reductions and scans, not coalescing (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.memory.policy.evidence import Evidence
from kernelskill.memory.policy.decide import decide
from memhelpers import BASE_FIELDS, code_features, make_evidence, report_from_fields
from test_mem_features import NAIVE_GEMM, cuda_candidate, features

SERIAL_SOFTMAX = """
__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        float m = -INFINITY;
        for (int j = 0; j < cols; j++) m = fmaxf(m, x[row * cols + j]);
        float s = 0.0f;
        for (int j = 0; j < cols; j++) s += expf(x[row * cols + j] - m);
        for (int j = 0; j < cols; j++) y[row * cols + j] = expf(x[row * cols + j] - m) / s;
    }
}
"""
SERIAL_SCAN = """
__global__ void cumsum_rows(const float* x, float* y, int rows, int n) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) {
        acc += x[row * n + j];
        y[row * n + j] = acc;
    }
}
"""
MATVEC = """
__global__ void gemv(const float* A, const float* x, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) acc += A[row * K + k] * x[k];
        y[row] = acc;
    }
}
"""
BLOCK_REDUCTION = """
__global__ void row_sum(const float* x, float* y, int n) {
    __shared__ float part[32];
    float v = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) v += x[blockIdx.x * n + j];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) { float s = 0; for (int w = 0; w < blockDim.x / 32; ++w) s += part[w]; y[blockIdx.x] = s; }
}
"""
GRID_STRIDE = """
__global__ void scale(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = 2.0f * x[i];
}
"""
MAX_POOL = """
__global__ void maxpool2d(const float* x, float* y, int H, int W, int K) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int oh = i / (W / K), ow = i % (W / K);
    if (oh >= H / K) return;
    float m = -INFINITY;
    for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw) m = fmaxf(m, x[(oh * K + kh) * W + ow * K + kw]);
    y[i] = m;
}
"""
TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def {kernel}


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        k[(x.shape[0],)](x, y, x.shape[1])
        return y
'''
TRITON_SERIAL_SUM = """k(x_ptr, y_ptr, n):
    row = tl.program_id(0)
    acc = 0.0
    for j in range(0, n):
        acc += tl.load(x_ptr + row * n + j)
    tl.store(y_ptr + row, acc)
"""
TRITON_SERIAL_SCAN = """k(x_ptr, y_ptr, n):
    row = tl.program_id(0)
    acc = 0.0
    for j in range(0, n):
        acc += tl.load(x_ptr + row * n + j)
        tl.store(y_ptr + row * n + j, acc)
"""
TRITON_BLOCK_SUM = """k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 1024):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))
"""

SERIAL = ("serial_reduction_loop", "serial_scan", "matvec_like")


@pytest.mark.parametrize(("name", "source", "expected"), [
    ("cuda softmax, a thread per row", cuda_candidate(SERIAL_SOFTMAX), (True, False, False)),
    ("cuda scan, a thread per row", cuda_candidate(SERIAL_SCAN), (True, True, False)),
    ("cuda gemv, a thread per row", cuda_candidate(MATVEC), (True, False, True)),
    ("cuda naive gemm: serial, but a matrix product", cuda_candidate(NAIVE_GEMM), (True, False, False)),
    ("cuda block reduction: threads cooperate", cuda_candidate(BLOCK_REDUCTION), (False, False, False)),
    ("cuda grid-stride elementwise", cuda_candidate(GRID_STRIDE), (False, False, False)),
    ("cuda max pool: a window, not a row walk", cuda_candidate(MAX_POOL), (False, False, False)),
    ("triton scalar loop sum", TRITON.format(kernel=TRITON_SERIAL_SUM), (True, False, False)),
    ("triton scalar loop scan", TRITON.format(kernel=TRITON_SERIAL_SCAN), (True, True, False)),
    ("triton block sum", TRITON.format(kernel=TRITON_BLOCK_SUM), (False, False, False)),
])  # fmt: skip
def test_serial_features(kb, name, source, expected):
    f = features(kb, source)
    assert tuple(f[k] for k in SERIAL) == expected, name


def test_a_serial_softmax_is_a_reduction_not_pointwise(kb):
    # before issue 16 the row-serial softmax read as pointwise (no shuffles, no shared memory) and not a reduction
    f = features(kb, cuda_candidate(SERIAL_SOFTMAX))
    assert f["reduction"] and not f["pointwise"] and f["rereads_input"] and not f["gemm_like"]


def test_a_thread_per_row_gemv_is_not_a_matrix_product(kb):
    f = features(kb, cuda_candidate(MATVEC))
    assert not f["gemm_like"] and not f["naive_gemm"] and not f["pointwise"]
    assert features(kb, cuda_candidate(NAIVE_GEMM))["naive_gemm"]  # the real GEMM still is one


# What ncu shows for a thread-per-row kernel: every lane reads its own row (12.5 % of each sector used), a few
# thousand threads, tens of thousands of instructions each.
SCATTERED_SERIAL = {"memory_throughput_pct": 55, "global_ld_bytes_requested": 1.6e7, "threads_per_launch": 4096,
                    "warp_inst_executed": 4096 / 32 * 120000, "achieved_occupancy_pct": 3,
                    "theoretical_occupancy_pct": 100, "grid_size": 16}  # fmt: skip


def test_thread_per_row_softmax_gets_a_parallel_reduction_not_coalescing(kb):
    code = {"backend": "cuda", "serial_reduction_loop": True, "reduction": True, "rereads_input": True,
            "transcendental_heavy": True}  # fmt: skip
    d = decide(kb, make_evidence(kb, fields=SCATTERED_SERIAL, code=code))
    assert d.predicates["uncoalesced_loads"].state == "true"  # the symptom is in the trace ...
    assert d.bottleneck == "serial_execution" and d.bottleneck_rule == "serial_reduction"  # ... the cause decides
    assert d.case == "se_few_long_rows"  # 4096 threads: fewer than a warp per SM
    assert d.allowed_methods[0] == "multi_block_reduction" and "coalesce_memory_access" in d.forbidden
    derived = {x.id: x.value for x in d.derived}
    assert derived["thread_inst_per_thread"] == pytest.approx(120000 * 32 / 32)  # full warps: 32 lanes active


def test_serial_threads_from_metrics_alone_when_the_code_is_unknown(kb):
    d = decide(kb, make_evidence(kb, fields=SCATTERED_SERIAL, code=None))
    assert d.predicates["serial_threads"].state == "true" and d.predicates["serial_work"].state == "true"
    assert d.bottleneck == "serial_execution"


def test_a_serial_scan_gets_a_parallel_scan(kb):
    code = {"backend": "cuda", "serial_reduction_loop": True, "serial_scan": True, "reduction": True}
    d = decide(kb, make_evidence(kb, fields={**SCATTERED_SERIAL, "threads_per_launch": 65536}, code=code))
    assert d.case == "se_scan" and d.allowed_methods[0] == "parallel_scan"
    top = d.ranking[0]
    assert top.gain is not None and top.rule == "gain[0]: serial_scan" and "scan" in top.why


def test_many_tiny_launches_seen_by_ncu_alone_are_launch_overhead(kb):
    # 50 launches of one 3 us kernel, no PyTorch profiler: the tiny grids look occupancy-limited to the counters
    fields = {**BASE_FIELDS, "kernel_time_ns": 150_000, "achieved_occupancy_pct": 10, "grid_size": 4}
    ev = Evidence(ncu=report_from_fields(kb, fields, launches=50), ncu_status="ok", code_features=code_features(kb, {}))
    d = decide(kb, ev)
    runs = {f.id: f.value for f in d.run_features}
    assert runs["ncu_launches"] == 50 and runs["launches_per_forward"] is None  # no profiler: its count is unknown
    assert d.predicates["launch_bound_ncu"].state == "true" and d.predicates["grid_underfills_gpu"].state == "true"
    assert d.bottleneck == "launch_overhead"


# Real LLM-written kernels (tests/data/decision/llm, provenance in its README) the code rules misread before.
LLM = Path(__file__).resolve().parents[1] / "data" / "decision" / "llm"


@pytest.mark.parametrize(("kernel", "feature", "expected"), [
    # a thread per output summing its own prefix (the loop runs up to the thread's position): a scan, O(n^2)
    ("lb_l1_089_claude_cumsum", "serial_scan", True),
    # a running product stored at each step through an index computed in the body (int index = idx * n + i)
    ("lb_l1_090_llama70b_cumprod", "serial_scan", True),
    # a thread per row walking a literal 4096 columns: a row walk, not a window
    ("lb_l1_099_llama405b_triplet_loss", "serial_reduction_loop", True),
    # a[i * n + j] * b[i * n + j] summed: a row-wise dot product, not a matrix product
    ("lb_l1_097_gemini_cosine_loss", "gemm_like", False),
    # a direct convolution: its input-channel loop multiplies at computed offsets, not a matrix-vector product
    ("lb_l1_054_o1_conv3d", "matvec_like", False),
])  # fmt: skip
def test_real_llm_kernels_read_as_what_they_are(kb, kernel, feature, expected):
    assert features(kb, (LLM / kernel / "candidate.py").read_text())[feature] is expected
