"""Host-code rule helpers: what the code around the kernels does - the Python forward and the C++ launcher of a
load_inline extension (synchronizing calls, library calls in a host loop, an output zero-filled and then
overwritten, an affine epilogue after a library product)."""

from __future__ import annotations

import re

from kernelskill.memory.features.codeview import SourceView
from kernelskill.memory.features.cuda import cuda_affine_kernel, kernel_params, overwrites, split_args
from kernelskill.memory.features.serial import parenthesized, statement_after


HOST_PATTERNS = {
    "graphs": r"torch\.cuda\.graph\b|CUDAGraph|make_graphed_callables|cudaGraph\w*|cudaStreamBeginCapture"
              r"|mode\s*=\s*[\"']reduce-overhead",
    "sync": r"\.item\(\)|\.cpu\(\)|\.tolist\(\)|\.numpy\(\)|torch\.cuda\.synchronize|\.synchronize\(\)"
            r"|cudaDeviceSynchronize|cudaStreamSynchronize|\bprint\(",
    "dynamic_shape": r"\b(nonzero|masked_select|unique|unique_consecutive|bincount|repeat_interleave)\s*\(",
    "vendor": r"\btorch\.(matmul|mm|bmm|addmm|baddbmm|einsum|conv\w*|nn\.functional\.(linear|conv\w*))\s*\("
              r"|\bF\.(linear|conv\w*|scaled_dot_product_attention)\s*\(|[\w)\]]\s@\s[\w(]"
              r"|\.(matmul|mm|bmm)\s*\(",
    "low_precision": r"\btorch\.(float16|half|bfloat16|float8\w*)\b|\.half\(\)|\.bfloat16\(\)",
}  # fmt: skip


def any_match(pattern: str, *texts: str) -> bool:
    return any(re.search(pattern, t) for t in texts)


def host_sync(v: SourceView) -> bool:
    # cublasDestroy / cudnnDestroy synchronize the device: a handle destroyed in the launcher is a sync per forward
    return any_match(HOST_PATTERNS["sync"], v.host) or any_match(
        r"cudaDeviceSynchronize|cudaMemcpy\s*\(|\b(cublas|cublasLt|cudnn)Destroy\s*\(", v.cuda
    )


# a library product or convolution called from host code (C++ launcher): cuBLAS/cuDNN or ATen's own
_CPP_LIBRARY_CALL = re.compile(r"\b(?:cublas|cudnn)\w+\s*\(|\b(?:at|torch)::(?:matmul|mm|bmm|addmm|linear|conv\w*)\s*\("
                               r"|\.\s*(?:matmul|mm|bmm|addmm)\s*\(")  # fmt: skip


def library_calls_in_host_loop(v: SourceView) -> bool:
    """A host loop that calls a library product once per iteration (a batch done as a loop of cublasSgemm or
    torch.mm calls): each call is its own launch of a small product."""
    for m in re.finditer(r"\b(?:for|while)\s*\(", v.cuda_host):
        _, end = parenthesized(v.cuda_host, m.end() - 1)
        if _CPP_LIBRARY_CALL.search(statement_after(v.cuda_host, end)):
            return True
    return v.library_calls_in_loop


def _cpp_launches(host: str) -> list[tuple[str, list[str]]]:
    """(kernel name, arguments) of each <<<...>>> launch in host C++."""
    out = []
    for m in re.finditer(r"\b(\w+)\s*(?:<[^<>;]*>)?\s*<<<[^;]*?>>>\s*\(", host):
        args, _ = parenthesized(host, m.end() - 1)
        out.append((m.group(1), split_args(args)))
    return out


def zero_filled_output(v: SourceView) -> bool:
    """The launcher zero-fills a tensor (torch::zeros, zeros_like, cudaMemset, zero_(), fill_(0)) that a kernel
    then overwrites in full: the fill is a whole extra pass over the output that empty() would not make."""
    host = v.cuda_host
    filled = set(re.findall(r"\b(\w+)\s*=\s*(?:torch|at)::zeros(?:_like)?\s*\(", host))
    filled |= set(re.findall(r"\bcudaMemset(?:Async)?\s*\(\s*(?:\(\w+\s*\*\)\s*)?(\w+)", host))
    filled |= set(re.findall(r"\b(\w+)\s*\.\s*(?:zero_\s*\(|fill_\s*\(\s*0(?:\.0*)?f?\s*\))", host))
    if not filled:
        return False
    kernels = {re.search(r"__global__[^(]*?(\w+)\s*\(", k).group(1): k for k in v.cuda_kernels
               if re.search(r"__global__[^(]*?(\w+)\s*\(", k)}  # fmt: skip
    for name, args in _cpp_launches(host):
        kernel = kernels.get(name)
        if kernel is None:
            continue
        params = kernel_params(kernel)
        for arg, (param, pointer) in zip(args, params, strict=False):
            base = re.match(r"\s*(?:\([^)]*\)\s*)?(\w+)", arg)
            if pointer and base and base.group(1) in filled and overwrites(kernel, param):
                return True
    return False


def affine_epilogue(v: SourceView) -> bool:
    """After a library product in the forward (nn.Linear, a convolution, torch.matmul...), the candidate's kernels
    apply only an affine map with module constants to elements: a scale and shift that fold into the product's
    weights and bias at init, and an add that belongs in the product's epilogue."""
    return v.backend == "cuda" and v.library_product_before_kernel and bool(v.cuda_kernels) and all(
        cuda_affine_kernel(k) for k in v.cuda_kernels
    )
