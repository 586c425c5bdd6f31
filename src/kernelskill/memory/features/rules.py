"""The rule-mode code features: one extractor per feature declared in knowledge/code_features.yaml (mode: rule).

Each extractor reads a SourceView and returns the feature's value. They are deliberately simple pattern checks, in
families by what they read: cuda.py (regular expressions over comment-free CUDA C++), triton.py (syntax trees of
@triton.jit kernels), host.py (the Python forward and the C++ launcher) and serial.py (loops one thread walks
alone). This module combines them per backend and holds the registry, RULES, that the knowledge base is checked
against: the YAML `cuda:` / `triton:` text of each feature says, in words, what is matched; the two must be kept in
step (loading checks that every rule feature has an extractor here and vice versa).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kernelskill.memory.features.codeview import SourceView
from kernelskill.memory.features.cuda import (
    CUDA_PATTERNS, cuda_contended_atomics, cuda_fp64_math, cuda_gemm, cuda_lane_strided_store, cuda_mac,
    cuda_rereads, cuda_rereads_across_kernels, cuda_shared_tree, cuda_window_loop,
)  # fmt: skip
from kernelskill.memory.features.host import (
    HOST_PATTERNS, affine_epilogue, any_match, host_sync, library_calls_in_host_loop, zero_filled_output,
)  # fmt: skip
from kernelskill.memory.features.serial import SERIAL_RULES, matvec_like, serial_reduction_loop
from kernelskill.memory.features.triton import (
    TL_TRANSCENDENTAL, loops, tl_calls, tl_contended_atomics, tl_dot_in_loop, tl_fp64_math, tl_ieee_only,
    tl_mac_loop, tl_masked, tl_names, tl_reduces, tl_rereads, tl_strided_fast_axis,
)  # fmt: skip


Rule = Callable[[SourceView], bool | int | str]


def _per_backend(cuda: Callable[[SourceView], bool], triton: Callable[[SourceView], bool]) -> Rule:
    def rule(v: SourceView) -> bool:
        if v.backend == "cuda":
            return cuda(v)
        if v.backend == "triton":
            return triton(v)
        return False  # a plain PyTorch candidate has no kernels of its own

    return rule


def _shared_tiling(v: SourceView) -> bool:
    return _per_backend(
        lambda v: any("__shared__" in k and "__syncthreads" in k and "for" in k for k in v.cuda_kernels),
        lambda v: any(tl_dot_in_loop(k) for k in v.triton_kernels),
    )(v)


def _tensor_cores(v: SourceView) -> bool:
    return _per_backend(
        lambda v: any_match(CUDA_PATTERNS["tensor_cores"], v.cuda),
        lambda v: any("tl.dot" in tl_names(k) and (not tl_ieee_only(k) or _low_precision(v))
                      for k in v.triton_kernels),  # fmt: skip
    )(v)


def _low_precision(v: SourceView) -> bool:
    triton = any(re.search(r"\btl\.(float16|bfloat16|float8\w*)\b", s) for s in v.triton_sources)
    return any_match(CUDA_PATTERNS["low_precision"], v.cuda) or triton or any_match(HOST_PATTERNS["low_precision"], v.host)


def _gemm_like(v: SourceView) -> bool:
    # A matrix-vector product is a reduction per output row, not a matrix product: no operand is reused across
    # outputs on chip, and tensor cores do not apply.
    return _per_backend(
        lambda v: any(cuda_gemm(k) for k in v.cuda_kernels),
        lambda v: any("tl.dot" in tl_names(k) or tl_mac_loop(k) for k in v.triton_kernels),
    )(v) and not matvec_like(v)


def _register_tiling(v: SourceView) -> bool:
    def cuda(v: SourceView) -> bool:
        for k in v.cuda_kernels:
            for line in k.splitlines():
                m = re.search(r"\b(?:float|double|half|__half|int|float2|float4)\s+(\w+)\s*\[\s*\w+\s*\]", line)
                if m and "__shared__" not in line and re.search(rf"\b{m.group(1)}\s*(\[[^\]]*\])+\s*\+=", k):
                    return True
        return False

    def triton(v: SourceView) -> bool:
        return any(re.search(r"tl\.zeros\(\s*\(\s*\w+\s*,\s*\w+\s*\)", s) for s in v.triton_sources) or any(
            "tl.dot" in tl_names(k) for k in v.triton_kernels
        )

    return _per_backend(cuda, triton)(v)


def _reduction(v: SourceView) -> bool:
    return _per_backend(
        lambda v: any(re.search(CUDA_PATTERNS["reduction"], k) or ("__shared__" in k and re.search(CUDA_PATTERNS["tree"], k))
                      for k in v.cuda_kernels),  # fmt: skip
        lambda v: any(tl_reduces(k) for k in v.triton_kernels),
    )(v) or serial_reduction_loop(v)


def _stencil(v: SourceView) -> bool:
    def named(names: list[str]) -> bool:
        return any(re.search(r"conv|stencil|pool|laplac", n, re.IGNORECASE) for n in names)

    def cuda(v: SourceView) -> bool:
        names = re.findall(r"__global__\s+void\s+(\w+)", v.cuda)
        neighbours = any(re.search(r"[+-]\s*1\s*\]", k) and re.search(r"-\s*1\s*\]", k) for k in v.cuda_kernels)
        return named(names) or cuda_window_loop(v.cuda) or neighbours

    def triton(v: SourceView) -> bool:
        window = any(re.search(r"\bfor\s+(kh|kw|ky|kx|kd|dy|dx|r|s)\s+in\b", s) for s in v.triton_sources)
        return named([k.name for k in v.triton_kernels]) or window

    return _per_backend(cuda, triton)(v)


def _transcendental_heavy(v: SourceView) -> bool:
    def triton(v: SourceView) -> bool:
        calls = [n for k in v.triton_kernels for n, _ in tl_calls(k) if n.startswith("tl.")]
        return sum(1 for n in calls if n.split(".")[-1] in TL_TRANSCENDENTAL) + sum(
            len(re.findall(r"libdevice\.\w+\(", s)) for s in v.triton_sources
        ) >= 2

    def cuda(v: SourceView) -> bool:  # the kernels and the __device__ helpers they call (a gelu(x) helper)
        code = v.cuda_kernels + v.cuda_device_functions
        return sum(len(re.findall(CUDA_PATTERNS["transcendental"], k)) for k in code) >= 2

    return _per_backend(cuda, triton)(v)


def _pointwise(v: SourceView) -> bool:
    if not v.kernels:
        return False
    shared = any("__shared__" in k for k in v.cuda_kernels)
    return not (shared or _reduction(v) or _gemm_like(v) or _stencil(v) or RULES["atomics"](v)
                or matvec_like(v))


def _vectorized(v: SourceView) -> bool:
    def triton(v: SourceView) -> bool:
        hinted = any(re.search(r"make_block_ptr|make_tensor_descriptor|max_contiguous|multiple_of", s)
                     for s in v.triton_sources)  # fmt: skip
        loads = any("tl.load" in tl_names(k) for k in v.triton_kernels)
        return hinted or (loads and not any(tl_strided_fast_axis(k) for k in v.triton_kernels))

    return _per_backend(lambda v: any_match(CUDA_PATTERNS["vector"], v.cuda), triton)(v)


def _bounds(v: SourceView) -> bool:
    return _per_backend(lambda v: any(re.search(CUDA_PATTERNS["guard"], k) for k in v.cuda_kernels),
                        lambda v: any(tl_masked(k) for k in v.triton_kernels))(v)  # fmt: skip


def _tail(v: SourceView) -> bool:
    return _per_backend(
        lambda v: _bounds(v) and (any_match(CUDA_PATTERNS["ceil_div"], v.cuda, v.host) or any_match(CUDA_PATTERNS["remainder"], v.cuda)),
        lambda v: _bounds(v) and (any_match(r"\bcdiv\s*\(", v.text) or any(loops(k) for k in v.triton_kernels)
                                  or any_match(r"mask\s*=\s*[^,)]*<", *v.triton_sources)),
    )(v)


def _persistent(v: SourceView) -> bool:
    return _per_backend(
        lambda v: any_match(CUDA_PATTERNS["sm_count"], v.cuda, v.host) or any_match(CUDA_PATTERNS["grid_stride"], v.cuda),
        lambda v: any_match(r"tl\.num_programs\(", *v.triton_sources) and any(loops(k) for k in v.triton_kernels)
        or any_match(CUDA_PATTERNS["sm_count"], v.text),
    )(v)


def _shared_tree(v: SourceView) -> bool:
    return v.backend == "cuda" and any(cuda_shared_tree(k) for k in v.cuda_kernels)


RULES: dict[str, Rule] = {
    "backend": lambda v: v.backend,
    "kernel_count": lambda v: len(v.kernels),
    "launch_sites_per_forward": lambda v: v.launch_sites,
    "multiple_kernels_per_forward": lambda v: v.launch_sites > 1 or v.launch_in_loop,
    "shared_memory_tiling": _shared_tiling,
    "has_k_loop": _per_backend(lambda v: any(cuda_mac(k) for k in v.cuda_kernels),
                               lambda v: any(tl_mac_loop(k) or tl_dot_in_loop(k) for k in v.triton_kernels)),
    "uses_tensor_cores": _tensor_cores,
    "low_precision_dtype": _low_precision,
    "vectorized_access": _vectorized,
    "bounds_checks": _bounds,
    "tail_handling": _tail,
    "pointwise": _pointwise,
    "transcendental_heavy": _transcendental_heavy,
    "gemm_like": _gemm_like,
    "naive_gemm": lambda v: _gemm_like(v) and not _shared_tiling(v) and not _tensor_cores(v)
    and not any("tl.dot" in tl_names(k) for k in v.triton_kernels),
    "stencil_or_conv": _stencil,
    "reduction": _reduction,
    "rereads_input": _per_backend(lambda v: any(cuda_rereads(k) for k in v.cuda_kernels)
                                  or cuda_rereads_across_kernels(v),
                                  lambda v: any(tl_rereads(k) for k in v.triton_kernels)),  # fmt: skip
    "fp64_math_on_fp32_data": _per_backend(cuda_fp64_math, tl_fp64_math),
    "host_reduces_kernel_output": lambda v: v.backend in ("cuda", "triton") and v.host_reduces_kernel_output,
    "lane_strided_store": _per_backend(
        lambda v: any(cuda_lane_strided_store(k) for k in v.cuda_kernels),
        lambda v: any(tl_strided_fast_axis(k, ("tl.store",)) for k in v.triton_kernels),
    ),
    "warp_level_primitives": _per_backend(lambda v: any_match(CUDA_PATTERNS["warp"], v.cuda),
                                          lambda v: any(tl_reduces(k) for k in v.triton_kernels)),
    "atomics": _per_backend(lambda v: any_match(CUDA_PATTERNS["atomics"], v.cuda),
                            lambda v: any(n.startswith("tl.atomic_") for k in v.triton_kernels for n in tl_names(k))),
    "uses_cuda_graphs": lambda v: any_match(HOST_PATTERNS["graphs"], v.text, v.cuda),
    "host_sync_in_forward": host_sync,
    "cuda_graph_eligible": lambda v: not host_sync(v) and not any_match(HOST_PATTERNS["dynamic_shape"], v.host),
    "autotuned": _per_backend(lambda v: any_match(CUDA_PATTERNS["occupancy_api"], v.cuda),
                              lambda v: any_match(r"triton\.autotune\b|@autotune\b", v.text)),
    "persistent_grid": _persistent,
    "software_pipelined": _per_backend(
        lambda v: any_match(CUDA_PATTERNS["pipelined"], v.cuda),
        lambda v: any_match(r"num_stages\s*=\s*([2-9]|\d\d)|make_tensor_descriptor|TensorDescriptor", v.text),
    ),
    "calls_vendor_library": lambda v: any_match(HOST_PATTERNS["vendor"], v.host) or any_match(CUDA_PATTERNS["vendor"], v.cuda),
    "register_tiling": _register_tiling,
    "contended_atomics": _per_backend(lambda v: any(cuda_contended_atomics(k) for k in v.cuda_kernels),
                                      lambda v: any(tl_contended_atomics(k) for k in v.triton_kernels)),
    "shared_memory_tree": _shared_tree,
    "library_calls_in_host_loop": library_calls_in_host_loop,
    "zero_filled_output": lambda v: v.backend == "cuda" and zero_filled_output(v),
    "affine_epilogue": affine_epilogue,
    "launches_after_library_product": lambda v: v.launches_after_library_product,
    **SERIAL_RULES,
}  # fmt: skip
