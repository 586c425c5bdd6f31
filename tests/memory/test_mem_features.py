"""Code features of CUDA and Triton candidates, and the LLM-judge boundary for llm-mode features."""

from __future__ import annotations

import pytest

from kernelskill.errors import CandidateError
from kernelskill.memory.features.codeview import build_view, read_source
from kernelskill.memory.features.extract import clamp_feature_value, extract_features
from memhelpers import load_capture_script


def features(kb, source: str, filename: str = "candidate.py", judge=None) -> dict:
    found = extract_features(kb.code_features, build_view(source, filename), judge)
    return {name: fv.value for name, fv in found.items() if fv.status == "ok"}


def cuda_candidate(kernels: str, host: str = "", forward: str = "return ext.run(x)", functions=("run",)) -> str:
    return f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
{kernels}
torch::Tensor run(torch::Tensor x) {{
    auto y = torch::empty_like(x);
    int n = x.numel();
    {host}
    return y;
}}
"""
ext = load_inline(name="ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=cuda_src,
                  functions={list(functions)!r})


class ModelNew(nn.Module):
    def forward(self, x):
        {forward}
'''


ELEMENTWISE = """
__global__ void add_one(const float* __restrict__ x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;  // __shared__ in a comment must not count
}
"""
NAIVE_GEMM = """
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + col];
        C[row * N + col] = sum;
    }
}
"""
TILED_GEMM = """
__global__ void matmul_tiled(const float* A, const float* B, float* C, int N) {
    __shared__ float As[16][16];
    __shared__ float Bs[16][16];
    int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc[2] = {0.0f, 0.0f};
    for (int t = 0; t < N / 16; ++t) {
        As[ty][tx] = A[row * N + t * 16 + tx];
        Bs[ty][tx] = B[(t * 16 + ty) * N + col];
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc[0] += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[row * N + col] = acc[0];
}
"""
WMMA = """
#include <mma.h>
using namespace nvcuda;
__global__ void mm_tc(const half* a, const half* b, float* c) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    for (int k = 0; k < 64; k += 16) { wmma::load_matrix_sync(fa, a + k, 64); wmma::load_matrix_sync(fb, b + k, 64);
        wmma::mma_sync(fc, fa, fb, fc); }
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
"""
SHUFFLE_REDUCE = """
__global__ void total(const float4* x, float* out, int n4) {
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x) {
        float4 q = x[i]; v += q.x + q.y + q.z + q.w;
    }
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
"""
TREE_REDUCE = """
__global__ void tree(const float* x, float* out, int n) {
    __shared__ float s[256];
    int tid = threadIdx.x;
    s[tid] = x[blockIdx.x * 256 + tid];
    __syncthreads();
    for (int st = 128; st > 0; st >>= 1) { if (tid < st) s[tid] += s[tid + st]; __syncthreads(); }
    if (tid == 0) out[blockIdx.x] = s[0];
}
"""
SOFTMAX_TWO_PASS = """
__global__ void softmax(const float* x, float* y, int cols) {
    const float* row = x + blockIdx.x * cols;
    float m = -1e30f, s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[blockIdx.x * cols + c] = __expf(row[c] - m) / s;
}
"""
CONV = """
__global__ void conv2d(const float* in, const float* w, float* out, int H, int W, int KH, int KW) {
    int y = blockIdx.y, x = threadIdx.x;
    float acc = 0.0f;
    for (int kh = 0; kh < KH; ++kh)
        for (int kw = 0; kw < KW; ++kw) acc += in[(y + kh) * W + x + kw] * w[kh * KW + kw];
    out[y * W + x] = acc;
}
"""
PIPELINED = """
#include <cuda_pipeline.h>
__global__ void staged(const float* x, float* y) {
    __shared__ float buf[2][128];
    __pipeline_memcpy_async(&buf[0][threadIdx.x], &x[threadIdx.x], sizeof(float));
    __pipeline_commit();
    __pipeline_wait_prior(0);
    y[threadIdx.x] = buf[0][threadIdx.x];
}
"""


def test_cuda_elementwise(kb):
    f = features(kb, cuda_candidate(ELEMENTWISE, host="add_one<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), "
                                                      "y.data_ptr<float>(), n);"))  # fmt: skip
    assert f["backend"] == "cuda" and f["kernel_count"] == 1 and f["launch_sites_per_forward"] == 1
    assert f["pointwise"] and f["bounds_checks"] and f["tail_handling"]
    for name in ("shared_memory_tiling", "gemm_like", "reduction", "vectorized_access", "uses_tensor_cores",
                 "multiple_kernels_per_forward", "host_sync_in_forward", "calls_vendor_library", "stencil_or_conv"):
        assert f[name] is False, name
    assert f["cuda_graph_eligible"] is True


def test_cuda_naive_gemm(kb):
    f = features(kb, cuda_candidate(NAIVE_GEMM))
    assert f["gemm_like"] and f["naive_gemm"] and f["has_k_loop"]
    assert not f["shared_memory_tiling"] and not f["uses_tensor_cores"] and not f["pointwise"]


def test_cuda_tiled_gemm_with_register_accumulators(kb):
    f = features(kb, cuda_candidate(TILED_GEMM))
    assert f["shared_memory_tiling"] and f["gemm_like"] and f["has_k_loop"] and f["register_tiling"]
    assert not f["naive_gemm"] and not f["uses_tensor_cores"]


def test_cuda_tensor_cores(kb):
    f = features(kb, cuda_candidate(WMMA))
    assert f["uses_tensor_cores"] and f["gemm_like"] and f["low_precision_dtype"] and not f["naive_gemm"]


def test_cuda_shuffle_reduction(kb):
    f = features(kb, cuda_candidate(SHUFFLE_REDUCE))
    assert f["reduction"] and f["warp_level_primitives"] and f["atomics"]
    assert f["vectorized_access"] and f["persistent_grid"] and not f["pointwise"] and not f["gemm_like"]


def test_cuda_tree_reduction_without_warp_primitives(kb):
    f = features(kb, cuda_candidate(TREE_REDUCE))
    assert f["reduction"] and not f["warp_level_primitives"] and not f["atomics"]


def test_cuda_two_pass_softmax(kb):
    f = features(kb, cuda_candidate(SOFTMAX_TWO_PASS))
    assert f["rereads_input"] and f["transcendental_heavy"]
    assert not features(kb, cuda_candidate(NAIVE_GEMM))["rereads_input"]


def test_cuda_convolution(kb):
    f = features(kb, cuda_candidate(CONV))
    assert f["stencil_or_conv"] and not f["pointwise"]


def test_cuda_software_pipelining(kb):
    assert features(kb, cuda_candidate(PIPELINED))["software_pipelined"]
    assert not features(kb, cuda_candidate(TILED_GEMM))["software_pipelined"]


def test_host_side_features(kb):
    synced = features(kb, cuda_candidate(ELEMENTWISE, forward="y = ext.run(x)\n        print(y.sum().item())\n"
                                                               "        return y"))  # fmt: skip
    assert synced["host_sync_in_forward"] and not synced["cuda_graph_eligible"]
    looped = features(kb, cuda_candidate(ELEMENTWISE, forward="for _ in range(3):\n            x = ext.run(x)\n"
                                                              "        return x"))  # fmt: skip
    assert looped["multiple_kernels_per_forward"] and looped["launch_sites_per_forward"] == 1
    library = features(kb, cuda_candidate(ELEMENTWISE, forward="return ext.run(torch.matmul(x, x))"))
    assert library["calls_vendor_library"] and library["launch_sites_per_forward"] == 2


def test_bare_cuda_file(kb, tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(NAIVE_GEMM)
    found = extract_features(kb.code_features, read_source(path))
    assert found["backend"].value == "cuda" and found["naive_gemm"].value is True


TRITON_HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"

TRITON_GEMM = TRITON_HEADER + '''
@triton.autotune(configs=[triton.Config({"BM": 128, "BN": 128, "BK": 32}, num_warps=8, num_stages=3)], key=["M"])
@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * s_am + (k + rk)[None, :] * s_ak)
        b = tl.load(b_ptr + (k + rk)[:, None] * s_bk + rn[None, :] * s_bn)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.empty((a.shape[0], b.shape[1]), device=a.device)
        grid = lambda meta: (triton.cdiv(a.shape[0], meta["BM"]), triton.cdiv(b.shape[1], meta["BN"]))
        mm[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], a.stride(0), a.stride(1), b.stride(0), b.stride(1))
        return c
'''

TRITON_SOFTMAX = TRITON_HEADER + '''
@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = float("-inf")
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.max(tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-1e30), axis=0))
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        s += tl.sum(tl.exp(tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-1e30) - m), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols)
        tl.store(y_ptr + row * n_cols + cols, tl.exp(x - m) / s, mask=cols < n_cols)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
        return y
'''

TRITON_MISC = TRITON_HEADER + '''
@triton.jit
def gather_kernel(x_ptr, out_ptr, n, stride_unused, NUM_SMS: tl.constexpr, BLOCK: tl.constexpr):
    # tl.dot(a, b) in a comment must not count
    for tile in range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs * 32, mask=offs < n).to(tl.float16)
        tl.atomic_add(out_ptr, tl.sum(v.to(tl.float32), axis=0))


@triton.jit
def conv_row_kernel(x_ptr, w_ptr, y_ptr, n, KW: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for kw in range(KW):
        acc += tl.load(x_ptr + offs + kw, mask=offs + kw < n, other=0.0) * tl.load(w_ptr + kw)
    tl.store(y_ptr + offs, acc, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x, w):
        out = torch.zeros(1, device=x.device)
        y = torch.empty_like(x)
        for _ in range(2):
            gather_kernel[(132,)](x, out, x.numel(), 1, NUM_SMS=132, BLOCK=1024)
        conv_row_kernel[(triton.cdiv(x.numel(), 1024),)](x, w, y, x.numel(), KW=3, BLOCK=1024)
        return y + out
'''


def test_triton_gemm(kb):
    f = features(kb, TRITON_GEMM)
    assert f["backend"] == "triton" and f["kernel_count"] == 1 and f["launch_sites_per_forward"] == 1
    assert f["gemm_like"] and f["has_k_loop"] and f["shared_memory_tiling"] and f["uses_tensor_cores"]
    assert f["register_tiling"] and f["autotuned"] and f["software_pipelined"] and f["vectorized_access"]
    assert not f["naive_gemm"] and not f["pointwise"] and not f["reduction"]


def test_triton_ieee_dot_does_not_use_tensor_cores(kb):
    ieee = TRITON_GEMM.replace("acc = tl.dot(a, b, acc)", 'acc = tl.dot(a, b, acc, input_precision="ieee")')
    assert not features(kb, ieee)["uses_tensor_cores"]
    half = ieee.replace("acc = tl.dot(a, b, acc", "acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc")
    assert features(kb, half)["uses_tensor_cores"]


def test_triton_softmax(kb):
    f = features(kb, TRITON_SOFTMAX)
    assert f["reduction"] and f["warp_level_primitives"] and f["rereads_input"] and f["transcendental_heavy"]
    assert f["bounds_checks"] and f["tail_handling"] and f["vectorized_access"]
    assert not f["gemm_like"] and not f["has_k_loop"] and not f["pointwise"]


def test_triton_misc(kb):
    f = features(kb, TRITON_MISC)
    assert f["kernel_count"] == 2 and f["multiple_kernels_per_forward"]
    assert f["launch_sites_per_forward"] == 3  # two kernels and torch.zeros (the + operator is not counted)
    assert f["atomics"] and f["persistent_grid"] and f["low_precision_dtype"] and f["stencil_or_conv"]
    assert not f["vectorized_access"]  # offs * 32 strides the fastest axis
    assert not f["uses_tensor_cores"] and not f["shared_memory_tiling"]  # the tl.dot is in a comment


def test_plain_pytorch_candidate(kb):
    source = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass ModelNew(nn.Module):\n" \
             "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n\n" \
             "    def forward(self, x):\n        return F.relu(self.fc(x)) @ x.t()\n"  # fmt: skip
    f = features(kb, source)
    assert f["backend"] == "torch" and f["kernel_count"] == 0
    assert f["calls_vendor_library"] and f["launch_sites_per_forward"] == 3  # F.relu, self.fc, x.t()
    assert not f["pointwise"] and not f["gemm_like"]


def test_capture_scenarios_have_the_expected_structure(kb):
    capture = load_capture_script()
    expected = {
        "streaming_elementwise": {"pointwise": True, "vectorized_access": True, "gemm_like": False},
        "strided_transpose": {"pointwise": True, "vectorized_access": False},
        "naive_gemm": {"naive_gemm": True, "gemm_like": True, "shared_memory_tiling": False},
        "tiled_gemm_fp32": {"gemm_like": True, "shared_memory_tiling": True, "uses_tensor_cores": False,
                            "naive_gemm": False},
        "row_reduction": {"reduction": True, "gemm_like": False, "has_k_loop": False, "rereads_input": False},
        "many_tiny_launches": {"backend": "torch", "multiple_kernels_per_forward": True, "cuda_graph_eligible": True},
        "register_heavy": {"reduction": True, "pointwise": False, "has_k_loop": False},
    }  # fmt: skip
    for scenario in capture.SCENARIOS:
        f = features(kb, capture.scenario_source(scenario), f"{scenario.name}.py")
        for name, value in expected[scenario.name].items():
            assert f[name] == value, (scenario.name, name)


# ---- llm-mode features -----------------------------------------------------------------------------------------------


class FakeJudge:
    def __init__(self, answers: dict):
        self.answers, self.asked = answers, []

    def judge_feature(self, feature, source):
        self.asked.append(feature.id)
        answer = self.answers[feature.id]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_llm_features_are_unknown_without_a_judge(kb):
    found = extract_features(kb.code_features, build_view(TRITON_SOFTMAX))
    llm = [f for f in kb.code_features if f.mode == "llm"]
    assert llm and all(found[f.id].status == "unknown" and "no LLM client" in found[f.id].reason for f in llm)


def test_llm_answers_are_validated(kb):
    judge = FakeJudge({"uncoalesced_pattern": "yes", "divergent_branches": "maybe",
                       "redundant_work": RuntimeError("rate limited")})  # fmt: skip
    found = extract_features(kb.code_features, build_view(TRITON_SOFTMAX), judge)
    assert sorted(judge.asked) == ["divergent_branches", "redundant_work", "uncoalesced_pattern"]
    assert found["uncoalesced_pattern"].value is True and found["uncoalesced_pattern"].mode == "llm"
    assert found["divergent_branches"].status == "unknown" and "rejected LLM answer 'maybe'" in found[
        "divergent_branches"].reason  # fmt: skip
    redundant = found["redundant_work"]
    assert redundant.status == "unknown" and "RuntimeError: rate limited" in redundant.reason
    assert found["reduction"].mode == "rule"  # rule features are never asked


@pytest.mark.parametrize(
    ("feature", "raw", "value"),
    [("launch_sites_per_forward", "7", 7), ("launch_sites_per_forward", 9999, 256), ("launch_sites_per_forward", -3, 0),
     ("backend", " Triton ", "triton"), ("pointwise", "false", False), ("pointwise", True, True)],
)  # fmt: skip
def test_clamp_feature_value(kb, feature, raw, value):
    assert clamp_feature_value(kb.code_feature(feature), raw) == value


@pytest.mark.parametrize(("feature", "raw"), [("backend", "rocm"), ("pointwise", "perhaps"), ("kernel_count", "many")])
def test_clamp_feature_value_rejects(kb, feature, raw):
    with pytest.raises(ValueError):
        clamp_feature_value(kb.code_feature(feature), raw)


def test_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("import torch\n\ndef forward(:\n")
    with pytest.raises(CandidateError, match=r"bad.py: line 3: syntax error"):
        read_source(path)
