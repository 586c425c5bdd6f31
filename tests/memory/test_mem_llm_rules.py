"""Rules drawn from the real LLM-written kernels of tests/data/decision/llm: what the code shows (a window loop is
not a row walk, a strided reduced axis, a statistic recomputed per output, results thrown away, atomics into one
address, a shared-memory tree), what the problem's floor says (a product bandwidth-bound even on the FP32 pipes, rows
of thousands of elements, few outputs), and the decisions they lead to. Each test fails when its rule is removed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernelskill.memory.tools.bench import run_bench
from kernelskill.memory.features.codeview import build_view
from kernelskill.memory.policy.evidence import Evidence
from kernelskill.memory.features.extract import extract_features
from kernelskill.memory.policy.decide import decide
from kernelskill.review.work import ProblemWork
from memhelpers import make_evidence
from test_mem_features import cuda_candidate, features

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LLM = REPO / "tests" / "data" / "decision" / "llm"
MANIFEST = HERE / "llm_code_bench.yaml"

# review/work.py's figures for some of the fixtures' problem.py files (the manifest holds all of them)
PROBLEMS = {p["id"]: p["problem"] for p in yaml.safe_load(MANIFEST.read_text())["kernels"]}


def fixture_features(kb, kernel: str) -> dict:
    return features(kb, (LLM / kernel / "candidate.py").read_text())


def decide_fixture(kb, kernel: str, problem: bool = True):
    """The decision on a fixture's code alone, with its problem's work on an H200 (or without any problem)."""
    view = build_view((LLM / kernel / "candidate.py").read_text(), "candidate.py")
    ev = Evidence(code_features=extract_features(kb.code_features, view))
    if problem:
        ev.problem = ProblemWork(source="test", gpu="h200", **PROBLEMS[kernel])
    return decide(kb, ev)


def gain_of(d, method: str):
    return next(r for r in d.ranking if r.method == method)


# ---- a window loop is not a serial row walk --------------------------------------------------------------------------

POOL_BY_SIZE = """
__global__ void pool(const float* x, float* y, int H, int W, int kernel_size) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int oh = i / W, ow = i % W;
    float m = -INFINITY;
    for (int a = 0; a < kernel_size; a++)
        for (int b = 0; b < kernel_size; b++) m = fmaxf(m, x[(oh + a) * W + ow + b]);
    y[i] = m;
}
"""
POOL_PADDED = """
__global__ void pool1d(const float* x, float* y, int L, int K, int P) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float m = -INFINITY;
    for (int j = 0; j < K; j++) {
        int p = i + j - P;
        if (p >= 0 && p < L) m = fmaxf(m, x[p]);
    }
    y[i] = m;
}
"""
TRITON_WINDOW = '''
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, kernel_size):
    i = tl.program_id(0)
    acc = -float("inf")
    for j in range(kernel_size):
        acc = tl.maximum(acc, tl.load(x_ptr + i + j))
    tl.store(y_ptr + i, acc)


class ModelNew(nn.Module):
    def forward(self, x, y):
        k[(x.numel(),)](x, y, x.numel(), 3)
        return y
'''


@pytest.mark.parametrize(("name", "source"), [
    ("a loop up to kernel_size", cuda_candidate(POOL_BY_SIZE)),
    ("a coordinate tested against 0 (padding)", cuda_candidate(POOL_PADDED)),
    ("triton: range(kernel_size)", TRITON_WINDOW),
])  # fmt: skip
def test_a_window_loop_is_not_a_serial_reduction(kb, name, source):
    f = features(kb, source)
    assert not f["serial_reduction_loop"] and not f["reduction"], name


def test_the_llm_max_pool_window_is_not_a_row_walk(kb):
    # k, l < kernel_size with h = height_idx + k * dilation - padding checked against 0: a dilated 2x2 window
    f = fixture_features(kb, "lb_l1_042_llama405b_maxpool2d")
    assert not f["serial_reduction_loop"] and f["stencil_or_conv"]
    assert fixture_features(kb, "lb_l2_067_deepseek_conv_gelu_avgpool")["serial_reduction_loop"]  # h < height: a row


# ---- the reduced axis: strided or contiguous -------------------------------------------------------------------------

TRITON_STRIDED = '''
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, m):
    col = tl.program_id(0)
    acc = 0.0
    for i in range(0, n):
        acc += tl.load(x_ptr + {index})
    tl.store(y_ptr + col, acc)


class ModelNew(nn.Module):
    def forward(self, x, y):
        k[(x.shape[1],)](x, y, x.shape[0], x.shape[1])
        return y
'''


@pytest.mark.parametrize(("kernel", "expected"), [
    ("lb_l1_047_gpt4o_sum_dim1", True),  # x[b * N * M + i * stride + e]: the reduced axis is strided
    ("lb_l1_004_gpt4o_matvec", False),  # A[row * K + k]: a contiguous row
    ("lb_l2_067_deepseek_conv_gelu_avgpool", False),  # h * width, but the innermost loop walks w contiguously
    ("lb_l1_023_llama70b_softmax", False),
])  # fmt: skip
def test_strided_reduction_axis_on_real_kernels(kb, kernel, expected):
    assert fixture_features(kb, kernel)["strided_reduction_axis"] is expected


def test_strided_reduction_axis_in_triton(kb):
    assert features(kb, TRITON_STRIDED.format(index="i * m + col"))["strided_reduction_axis"]
    assert not features(kb, TRITON_STRIDED.format(index="col * n + i"))["strided_reduction_axis"]


def test_a_strided_reduction_with_few_outputs_is_split_not_given_a_block_per_output(kb):
    d = decide_fixture(kb, "lb_l1_047_gpt4o_sum_dim1")
    assert d.predicates["few_outputs"].state == "true"  # 16 x 256 = 4096 outputs
    assert d.case == "se_strided_axis" and d.allowed_methods[:2] == ["multi_block_reduction", "split_k"]
    assert "block_reduction" in d.forbidden and "warp_level_reduction" in d.forbidden
    # without the problem the output count is unknown: the case is passed over, not assumed
    d = decide_fixture(kb, "lb_l1_047_gpt4o_sum_dim1", problem=False)
    assert d.case != "se_strided_axis" and any("se_strided_axis" in c for c in d.caveats)
    # the same kernel on a 16 x 256 x 65536 tensor: a million outputs, a thread each is parallel enough already
    code = {k: v.value for k, v in d.features.items() if v.status == "ok"}
    big = {"flops": 0, "bytes": 4 * 16 * 257 * 65536, "output_bytes": 4 * 16 * 65536, "precision": "fp32",
           "gpu": "h200"}  # fmt: skip
    d = decide(kb, make_evidence(kb, fields=None, code=code, problem=big))
    assert d.predicates["few_outputs"].state == "false" and d.case == "se_strided_axis_many_outputs"
    assert "block_reduction" in d.forbidden and d.allowed_methods[0] == "vectorize_memory_access"


# ---- a statistic recomputed for every output -------------------------------------------------------------------------

RECOMPUTED_ROW = """
__global__ void norm(const float* x, float* y, int rows, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int row = idx / n;
    float s = 0.0f;
    for (int j = 0; j < n; j++) s += fabsf(x[row * n + j]);
    y[idx] = x[idx] / s;
}
"""
ONCE_PER_ROW = """
__global__ void norm(const float* x, float* y, int rows, int n) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
    for (int j = 0; j < n; j++) s += fabsf(x[row * n + j]);
    for (int j = 0; j < n; j++) y[row * n + j] = x[row * n + j] / s;
}
"""
TRITON_RECOMPUTED = '''
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n):
    idx = tl.program_id(0)
    row = idx // n
    s = 0.0
    for j in range(0, n):
        s += tl.abs(tl.load(x_ptr + row * n + j))
    inv = 1.0 / s
    tl.store(y_ptr + idx, tl.load(x_ptr + idx) * inv)


class ModelNew(nn.Module):
    def forward(self, x, y):
        k[(x.numel(),)](x, y, x.shape[1])
        return y
'''


@pytest.mark.parametrize(("name", "source", "expected"), [
    ("cuda: a thread per element re-sums its row", cuda_candidate(RECOMPUTED_ROW), True),
    ("cuda: a thread per row sums once, then writes the row", cuda_candidate(ONCE_PER_ROW), False),
    ("triton: a program per element re-sums its row", TRITON_RECOMPUTED, True),
])  # fmt: skip
def test_recomputed_reduction(kb, name, source, expected):
    assert features(kb, source)["recomputed_reduction"] is expected, name


@pytest.mark.parametrize(("kernel", "expected"), [
    ("lb_l1_036_llama405b_rmsnorm", True),  # out[idx] = x[idx] / rms after a 64-channel loop, per output
    ("lb_l1_039_claude_l2norm", False),  # every thread re-sums too, but its stores walk the row: a block reduction
    ("lb_l1_004_gpt4o_matvec", False),  # C[row] = sum reads no input element
    ("lb_l1_097_gemini_cosine_loss", False),
])  # fmt: skip
def test_recomputed_reduction_on_real_kernels(kb, kernel, expected):
    assert fixture_features(kb, kernel)["recomputed_reduction"] is expected


def test_a_recomputed_statistic_is_computed_once_first(kb):
    d = decide_fixture(kb, "lb_l1_036_llama405b_rmsnorm")
    assert d.bottleneck == "wasted_work" and d.bottleneck_rule == "work_no_output_needs"
    assert d.case == "ww_recomputed_statistic" and d.allowed_methods[:2] == ["algebraic_simplification",
                                                                              "thread_coarsening"]  # fmt: skip
    top = d.ranking[0]
    assert top.gain == 4 and top.rule == "gain[0]: recomputed_reduction"
    # the block-per-row estimate (20x for a serial row walk) does not apply to a recomputed statistic
    assert gain_of(d, "block_reduction").gain is None


# ---- results thrown away ---------------------------------------------------------------------------------------------

STRIDED_STORE = """
__global__ void pool(const float* x, float* y, int W, int S) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int h = i / W, w = i % W;
    float m = fmaxf(x[i], x[i + 1]);
    if (h % S == 0 && w % S == 0) y[(h / S) * (W / S) + w / S] = m;
}
"""
BOTH_BRANCHES = """
__global__ void pick(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i % 2 == 0) y[i] = x[i];
    else y[i] = -x[i];
}
"""
WARP_LEADER = """
__global__ void row_sum(const float* x, float* y, int n) {
    float v = 0.0f;
    for (int j = threadIdx.x; j < n; j += 32) v += x[blockIdx.x * n + j];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    int lane = threadIdx.x % 32;
    if (lane % 32 == 0) y[blockIdx.x] = v;
}
"""
TRITON_DISCARDED = '''
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, s):
    i = tl.program_id(0)
    v = tl.maximum(tl.load(x_ptr + i), tl.load(x_ptr + i + 1))
    if i % s == 0:
        tl.store(y_ptr + i // s, v)


class ModelNew(nn.Module):
    def forward(self, x, y):
        k[(x.numel() - 1,)](x, y, 2)
        return y
'''


@pytest.mark.parametrize(("name", "source", "expected"), [
    ("cuda: only positions divisible by the stride store", cuda_candidate(STRIDED_STORE), True),
    ("cuda: a store in each branch discards nothing", cuda_candidate(BOTH_BRANCHES), False),
    ("cuda: a warp's leader stores the combined sum", cuda_candidate(WARP_LEADER), False),
    ("triton: only programs divisible by the stride store", TRITON_DISCARDED, True),
])  # fmt: skip
def test_discarded_thread_results(kb, name, source, expected):
    assert features(kb, source)["discarded_thread_results"] is expected, name


def test_a_pool_launched_over_its_inputs_is_launched_over_its_outputs_first(kb):
    assert fixture_features(kb, "lb_l1_042_llama405b_maxpool2d")["discarded_thread_results"]
    d = decide_fixture(kb, "lb_l1_042_llama405b_maxpool2d")
    assert d.bottleneck == "wasted_work" and d.case == "ww_discarded_results"
    assert d.allowed_methods[0] == "algebraic_simplification" and "tensor_cores" in d.forbidden
    assert d.ranking[0].rule == "gain[1]: discarded_thread_results"


# ---- atomics into one address per element ----------------------------------------------------------------------------

BLOCK_THEN_ATOMIC = """
__global__ void total(const float* x, float* out, int n) {
    __shared__ float part[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(out, part[0]);
}
"""
SCATTER_ADD = """
__global__ void scatter(const float* x, const int* index, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&out[index[i]], x[i]);
}
"""
ONE_TOTAL = """
__global__ void total(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}
"""
TRITON_ATOMIC = '''
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    {line}


class ModelNew(nn.Module):
    def forward(self, x, out):
        k[(x.shape[0],)](x, out, x.shape[1], BLOCK=1024)
        return out
'''


@pytest.mark.parametrize(("name", "source", "expected"), [
    ("cuda: every element into its row's total", (LLM / "lb_l1_038_o1_l1norm" / "candidate.py").read_text(), True),
    ("cuda: every element into one total", cuda_candidate(ONE_TOTAL), True),
    ("cuda: combined in the block, one atomic per block", cuda_candidate(BLOCK_THEN_ATOMIC), False),
    ("cuda: a scatter-add to data-dependent addresses", cuda_candidate(SCATTER_ADD), False),
    ("triton: every lane into the row's total", TRITON_ATOMIC.format(line="tl.atomic_add(out_ptr + row, x)"), True),
    ("triton: tl.sum first, one atomic", TRITON_ATOMIC.format(line="tl.atomic_add(out_ptr + row, tl.sum(x))"),
     False),
])  # fmt: skip
def test_contended_atomics(kb, name, source, expected):
    assert features(kb, source)["contended_atomics"] is expected, name


def test_atomics_per_element_rank_reducing_the_contention_first(kb):
    d = decide_fixture(kb, "lb_l1_038_o1_l1norm")
    assert d.case == "sf_atomic_reduction" and d.allowed_methods[0] == "reduce_atomic_contention"
    assert d.ranking[0].rule == "gain[0]: contended_atomics"
    # no shared-memory tree here, so warp shuffles get no estimate of replacing one
    assert gain_of(d, "warp_level_reduction").gain is None


# ---- a shared-memory tree costs less than a pass over the data -------------------------------------------------------


def test_a_block_reduction_with_three_passes_gets_the_online_pass_before_shuffles(kb):
    f = fixture_features(kb, "lb_l1_023_gpt4o_softmax")
    assert f["shared_memory_tree"] and not f["warp_level_primitives"] and f["rereads_input"]
    d = decide_fixture(kb, "lb_l1_023_gpt4o_softmax")
    assert d.case == "sf_reduction_without_warp_primitives"
    assert d.allowed_methods[:2] == ["single_pass_reduction", "warp_level_reduction"]
    warp = gain_of(d, "warp_level_reduction")
    assert warp.rule == "gain[2]: shared_memory_tree and not warp_level_primitives" and warp.gain < 1.5
    assert "multi_block_reduction" in d.allowed_methods  # 16 rows of 16384: several blocks per row
    assert not features(kb, TRITON_WINDOW)["shared_memory_tree"]  # Triton writes no tree by hand


def test_a_tiled_gemm_halving_an_index_is_not_a_tree(kb):
    # `lrow = tid >> 1` in a shared-memory GEMM: no loop halves a step to read the shared tiles
    gemm = REPO / "tests" / "data" / "candidates" / "g03_linear_bias_relu_4096" / "cuda_ok.py"
    assert not features(kb, gemm.read_text())["shared_memory_tree"]


# ---- the problem's floor ---------------------------------------------------------------------------------------------


def test_run_features_from_the_problem(kb):
    d = decide_fixture(kb, "lb_l1_009_claude_tall_skinny")
    runs = {f.id: f.value for f in d.run_features}
    assert runs["floor_memory_ms"] == pytest.approx(1075838976 / 4.8e12 * 1e3)
    assert runs["floor_fp32_ms"] == pytest.approx(8589934592 / 67e12 * 1e3)
    assert runs["problem_outputs"] == 16384 * 16384 and runs["problem_inputs_per_output"] < 0.01
    matvec = {f.id: f.value for f in decide_fixture(kb, "lb_l1_004_gpt4o_matvec").run_features}
    assert matvec["problem_outputs"] == 256 and matvec["problem_inputs_per_output"] > 131072
    # without a problem every one of them is unknown, never 0
    runs = {f.id: f for f in decide_fixture(kb, "lb_l1_009_claude_tall_skinny", problem=False).run_features}
    assert all(runs[k].status == "missing" for k in ("floor_memory_ms", "floor_fp32_ms", "problem_outputs",
                                                     "problem_inputs_per_output"))  # fmt: skip


def test_a_product_bandwidth_bound_on_the_fp32_pipes_gets_no_tensor_cores(kb):
    # (16384 x 16) @ (16 x 16384): 8.6 GFLOP (0.13 ms on the FMA pipes) but a 1 GiB output (0.22 ms of HBM)
    d = decide_fixture(kb, "lb_l1_009_claude_tall_skinny")
    assert d.predicates["floor_set_by_bytes"].state == "true"
    assert d.case == "sf_gemm_bandwidth_bound" and d.allowed_methods[0] == "register_blocking"
    assert "tensor_cores" in d.forbidden
    # with metrics (a tiled product busy in L1), the veto takes tensor cores out of the case the counters pick
    cache_bound = {"memory_throughput_pct": 80, "dram_throughput_pct": 10, "l1tex_throughput_pct": 80,
                   "smem_wavefronts_ld": 1.0e6}  # fmt: skip
    code = {"backend": "cuda", "gemm_like": True, "shared_memory_tiling": True, "has_k_loop": True}
    problem = {**PROBLEMS["lb_l1_009_claude_tall_skinny"], "gpu": "h200"}
    d = decide(kb, make_evidence(kb, fields=cache_bound, code=code, problem=problem))
    assert d.case == "mb_cache_gemm_tiled"
    assert ("tensor_cores", "tensor_cores_need_a_compute_bound_problem") in {(v.method, v.rule) for v in d.vetoed}
    assert "tensor_cores" in decide(kb, make_evidence(kb, fields=cache_bound, code=code)).allowed_methods
    # a 4096^3 product is compute-bound: tensor cores stay first
    d = decide_fixture(kb, "lb_l1_013_claude_symmetric_matmul")
    assert d.predicates["floor_set_by_bytes"].state == "false" and d.allowed_methods[0] == "tensor_cores"
    # without the problem the floor is unknown and nothing is vetoed for it
    d = decide_fixture(kb, "lb_l1_009_claude_tall_skinny", problem=False)
    rule = next(r for r in d.forbidden_rules if r.id == "tensor_cores_need_a_compute_bound_problem")
    assert rule.state == "unknown" and not rule.applied and d.allowed_methods[0] == "tensor_cores"


def test_a_gemv_with_rows_of_thousands_gets_a_block_per_row_before_a_warp(kb):
    d = decide_fixture(kb, "lb_l1_004_gpt4o_matvec")  # 256 rows of 131072
    assert d.predicates["long_reduction"].state == "true"
    assert d.allowed_methods[:2] == ["block_reduction", "warp_level_reduction"]
    assert d.ranking[0].rule == "gain[0]: matvec_like and long_reduction"
    # the row length unknown: a warp per row, the usual GEMV layout, stays first
    d = decide_fixture(kb, "lb_l1_004_gpt4o_matvec", problem=False)
    assert d.allowed_methods[0] == "warp_level_reduction"


# ---- reductions that are already parallel ----------------------------------------------------------------------------


def test_a_parallel_reduction_over_two_kernels_is_not_left_without_advice(kb):
    # CUDA-L1's cosine loss on its code alone (no capture): a block per row with shuffles, then a one-block mean
    d = decide_fixture(kb, "cl1_l1_097_cosine_loss", problem=False)
    assert d.case == "sf_parallel_reduction_several_kernels"
    assert d.allowed_methods[:2] == ["kernel_fusion", "cuda_graphs"]


def test_a_single_warp_shuffle_reduction_gets_the_remaining_levers(kb):
    source = cuda_candidate(WARP_LEADER)
    d = decide(kb, Evidence(code_features=extract_features(kb.code_features, build_view(source, "c.py"))))
    assert d.case == "sf_parallel_reduction" and d.allowed_methods[0] == "multi_block_reduction"


# ---- the benchmark of the real kernels on code and problem alone -----------------------------------------------------


def test_the_manifest_carries_each_fixtures_labels():
    manifest = yaml.safe_load(MANIFEST.read_text())["kernels"]
    assert sorted(k["id"] for k in manifest) == sorted(p.name for p in LLM.iterdir() if p.is_dir())
    for k in manifest:
        labels = yaml.safe_load((LLM / k["id"] / "labels.yaml").read_text())
        assert k["expert"] == labels["expert"] and k["source"] == labels["source"], k["id"]
        assert " ".join(k["why"].split()) == " ".join(labels["why"].split()), k["id"]


@pytest.mark.slow
def test_the_manifest_problems_are_what_work_py_measures():
    from kernelskill.review.work import measure_problem_work

    for kernel in ("lb_l1_009_claude_tall_skinny", "lb_l1_047_gpt4o_sum_dim1"):
        w = measure_problem_work(LLM / kernel / "problem.py")
        assert {k: getattr(w, k) for k in PROBLEMS[kernel]} == PROBLEMS[kernel], kernel


def test_the_real_llm_kernels_on_code_and_problem(kb):
    report = run_bench(MANIFEST, kb)
    assert report.empty == []
    assert report.allowed_accuracy >= 0.93 and report.top1_accuracy >= 0.8, [
        (r.id, r.allowed[:3], r.expert) for r in report.kernels if not r.top1_hit]
