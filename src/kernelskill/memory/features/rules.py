"""Rule-based extractors for the code features declared in knowledge/code_features.yaml (mode: rule).

Each extractor reads a SourceView and returns the feature's value. They are deliberately simple pattern checks:
CUDA kernels are matched with regular expressions over comment-free C++ text, Triton kernels are walked as Python
syntax trees. The YAML `cuda:` / `triton:` text of each feature says, in words, what is matched here; the two must
be kept in step (the knowledge-base loader checks that every rule feature has an extractor and vice versa).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from kernelskill.memory.features.serial import (
    SERIAL_RULES, block_names, matvec_like, parenthesized, serial_reduction_loop, statement_after,
)  # fmt: skip
from kernelskill.memory.features.codeview import SourceView

Rule = Callable[[SourceView], bool | int | str]

_TL_REDUCE = {"sum", "max", "min", "reduce", "argmax", "argmin", "xor_sum", "cumsum", "cumprod", "associative_scan"}
_TL_TRANSCENDENTAL = {"exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "sqrt_rn", "rsqrt", "sigmoid", "erf",
                      "tanh", "pow", "fast_expf", "fast_logf"}  # fmt: skip
_CUDA = {
    "tensor_cores": r"\bwmma::|\bmma_sync\b|\bmma\.sync\b|\bwgmma\b|\bcute::|\bcutlass::|__hmma|\bmma\.m\d+n\d+",
    "low_precision": r"\b(half2?|__half2?|__nv_bfloat162?|nv_bfloat162?|__nv_fp8\w*|at::Half|at::BFloat16"
                     r"|torch::kHalf|torch::kBFloat16|kFloat16|kBFloat16)\b",
    "vector": r"\b(float[24]|int[24]|uint[24]|double2|half2|__half2|__nv_bfloat162|longlong2|char4|uchar4)\b"
              r"|ld\.global(\.nc)?\.v[248]",
    "guard": r"\bif\s*\([^;{]*(<|>=|<=|>)[^;{]*\)",
    "ceil_div": r"\(\s*[\w.\->]+\s*\+\s*[\w.\->()]+\s*-\s*1\s*\)\s*/|\(\s*[\w.\->]+\s*\+\s*\d+\s*\)\s*/"
                r"|\bcdiv\b|\bceil_div\b|\bDIV_UP\b",
    "remainder": r"%\s*(2|4|8|16)\b|&\s*(1|3|7|15)\b",
    "transcendental": r"\b(?:__)?(?:expf?|exp2f?|expm1f?|logf?|log2f?|log1pf?|sinf?|cosf?|tanf?|tanhf?|erff?|"
                      r"erfcf?|powf?|sqrtf?|rsqrtf?|cbrtf?|__fdividef|hexp|hlog|h2exp|h2log)\s*\(",
    # a loop over a window index; its step (group 2) says whether it is one: s >>= 1 halves a reduction tree
    "window_loop": r"for\s*\(\s*(?:int|unsigned|size_t|int64_t)?\s*(kh|kw|ky|kx|kd|dy|dx|fy|fx|r|s|ki|kj)\s*="
                   r"[^;]*;[^;]*;([^)]*)\)",
    "reduction": r"__shfl\w*_sync|\batomicAdd\b|cg::reduce|__reduce_\w+_sync|\b(Block|Warp)Reduce\b|cub::\w*Reduce",
    "tree": r">>=\s*1|/=\s*2|>>\s*1\s*;",
    "warp": r"__shfl\w*_sync|__reduce_\w+_sync|cg::reduce|cooperative_groups::reduce|\bWarpReduce\b|__ballot_sync"
            r"|__any_sync|__all_sync|__match_\w+_sync|tiled_partition",
    "atomics": r"\batomic(Add|Sub|Max|Min|Exch|CAS|And|Or|Xor|Inc|Dec)\w*\s*\(|\bred\.global",
    "sm_count": r"multiProcessorCount|cudaDevAttrMultiProcessorCount|multi_processor_count|\bnum_sms\b|\bNUM_SMS\b",
    "grid_stride": r"\+=\s*(blockDim\.\w\s*\*\s*gridDim\.\w|gridDim\.\w\s*\*\s*blockDim\.\w|gridDim\.\w)",
    "pipelined": r"cp\.async|__pipeline_memcpy_async|cuda::memcpy_async|cuda::pipeline|\bcp_async\w*|cuTensorMap"
                 r"|__pipeline_commit|\[\s*2\s*\]\s*\[",
    "vendor": r"\bcublas\w*|\bcudnn\w*|\b(at|torch)::(matmul|mm|bmm|addmm|conv\w*|linear)\b",
    "occupancy_api": r"cudaOccupancyMaxPotentialBlockSize|cudaOccupancyMaxActiveBlocksPerMultiprocessor",
}  # fmt: skip
_HOST = {
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


def _any(pattern: str, *texts: str) -> bool:
    return any(re.search(pattern, t) for t in texts)


# ---- Triton helpers (syntax trees of @triton.jit functions) ------------------------------------------------------


def _tl_calls(node: ast.AST) -> list[tuple[str, ast.Call]]:
    """('tl.dot', call) for calls on the tl module; ('.sum', call) for tensor methods."""
    out = []
    for c in ast.walk(node):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute):
            base = ast.unparse(c.func.value)
            is_tl = base in ("tl", "triton.language", "tl.math", "libdevice", "tl.extra.cuda.libdevice")
            out.append(((f"tl.{c.func.attr}" if is_tl else f".{c.func.attr}"), c))
    return out


def _tl_names(node: ast.AST) -> set[str]:
    return {name for name, _ in _tl_calls(node)}


def _loops(node: ast.AST) -> list[ast.For | ast.While]:
    return [n for n in ast.walk(node) if isinstance(n, ast.For | ast.While)]


_POINTER_CALLS = {"tl.load", "tl.store", "tl.make_block_ptr", "tl.advance", "tl.make_tensor_descriptor"}


def _products(node: ast.AST) -> list[ast.BinOp]:
    """Multiplications in `node`, leaving out pointer arithmetic inside tl.load(...) and friends."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) in _POINTER_CALLS:
        return []
    own = [node] if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) else []
    return own + [m for child in ast.iter_child_nodes(node) for m in _products(child)]


def _distinct_product(node: ast.AST) -> bool:
    """a * b with two different, non-constant operands (x * x is a sum of squares, not a dot product)."""
    return any(
        ast.unparse(m.left) != ast.unparse(m.right)
        and not isinstance(m.left, ast.Constant) and not isinstance(m.right, ast.Constant)
        for m in _products(node)
    )  # fmt: skip


def _is_mac(node: ast.AST) -> bool:
    """A multiply-accumulate: acc += a * b, tl.sum(a * b), or tl.dot."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        return _distinct_product(node.value)
    if isinstance(node, ast.Call):
        callee = ast.unparse(node.func)
        return callee == "tl.dot" or (callee == "tl.sum" and bool(node.args) and _distinct_product(node.args[0]))
    return False


def _tl_dot_in_loop(k: ast.FunctionDef) -> bool:
    return any("tl.dot" in _tl_names(loop) for loop in _loops(k))


def _tl_mac_loop(k: ast.FunctionDef) -> bool:
    return any(_is_mac(n) for loop in _loops(k) for n in ast.walk(loop))


def _tl_ieee_only(k: ast.FunctionDef) -> bool:
    dots = [c for name, c in _tl_calls(k) if name == "tl.dot"]
    for c in dots:
        kws = {kw.arg: ast.unparse(kw.value) for kw in c.keywords}
        if kws.get("input_precision", "").strip("'\"") != "ieee" and kws.get("allow_tf32") != "False":
            return False
    return bool(dots)


def _tl_strided_fast_axis(k: ast.FunctionDef, calls: tuple[str, ...] = ("tl.load", "tl.store")) -> bool:
    """A load/store pointer whose fastest axis is a tl.arange scaled by a stride (not contiguous)."""
    derived: set[str] = set()
    for n in ast.walk(k):  # names computed from tl.arange (one pass in source order is enough for kernels)
        if isinstance(n, ast.Assign) and ("tl.arange" in ast.unparse(n.value) or _reads(n.value, derived)):
            derived |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    for name, call in _tl_calls(k):
        if name not in calls or not call.args:
            continue
        for m in ast.walk(call.args[0]):
            if isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mult):
                for side, other in ((m.left, m.right), (m.right, m.left)):
                    row_axis = isinstance(side, ast.Subscript) and _slice_text(side) == ":,None"
                    arange = "tl.arange" in ast.unparse(side) or _reads(side, derived)
                    if arange and not row_axis and _proves_stride(other):
                        return True
    return False


# Names that look like sizes (n, N, n_cols, BLOCK, width, ld...): multiplying the fastest axis by one of them
# strides it. Other names (stride_x, s_ak) may be 1 at run time - Triton specializes integer arguments equal to 1,
# which is the idiom for possibly-unit strides - so they prove nothing.
_SIZE_NAME = re.compile(r"^(n|n_\w+|num_\w+|[A-Z][A-Z0-9_]*|\w*(size|cols|rows|width|height|dim|len|numel)\w*|ld\w*)$")


def _proves_stride(multiplier: ast.AST) -> bool:
    if isinstance(multiplier, ast.Constant):
        return isinstance(multiplier.value, int | float) and multiplier.value > 1
    return isinstance(multiplier, ast.Name) and bool(_SIZE_NAME.match(multiplier.id))


def _slice_text(node: ast.Subscript) -> str:
    """'x[:, None]' -> ':,None' (ast.unparse writes the tuple with or without parentheses by Python version)."""
    return ast.unparse(node.slice).replace(" ", "").removeprefix("(").removesuffix(")")


def _reads(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _tl_masked(k: ast.FunctionDef) -> bool:
    for name, call in _tl_calls(k):
        if name in ("tl.load", "tl.store") and (len(call.args) >= 3 or any(
            kw.arg in ("mask", "boundary_check") for kw in call.keywords
        )):  # fmt: skip
            return True
    return False


def _tl_reduces(k: ast.FunctionDef) -> bool:
    return any(name.split(".")[-1] in _TL_REDUCE for name in _tl_names(k))


# ---- the rules -----------------------------------------------------------------------------------------------------


def _per_backend(cuda: Callable[[SourceView], bool], triton: Callable[[SourceView], bool]) -> Rule:
    def rule(v: SourceView) -> bool:
        if v.backend == "cuda":
            return cuda(v)
        if v.backend == "triton":
            return triton(v)
        return False  # a plain PyTorch candidate has no kernels of its own

    return rule


def _cuda_mac(kernel: str) -> bool:
    if "for" not in kernel:
        return False
    loop_vars = set(re.findall(r"for\s*\(\s*(?:int|unsigned|size_t|int64_t|long)?\s*(\w+)\s*=", kernel))
    for lhs, rhs in re.findall(r"([\w\[\]\s.+*-]+?)\s*\+=\s*([^;]+);", kernel):
        if lhs.strip() in loop_vars or re.search(r"blockDim|gridDim|stride", rhs):
            continue
        subscript_product = re.search(r"\]\s*\*\s*[\w(]|\*\s*[A-Za-z_]\w*\s*\[", rhs)
        if subscript_product or re.search(r"\bfmaf?\s*\(|__fmaf?_r\w\s*\(", rhs):
            return True
    return bool(re.search(r"\bfmaf?\s*\(|__fmaf?_r\w\s*\(", kernel) and "for" in kernel)


def _cuda_gemm(kernel: str) -> bool:
    if re.search(_CUDA["tensor_cores"], kernel):
        return True
    # two different arrays multiplied inside an accumulation at different positions: acc += A[..] * B[..] (or
    # As[..][..] * Bs[..][..]); a[i * n + j] * b[i * n + j] is an elementwise product summed (a row-wise dot
    # product, cosine similarity), not a matrix product
    if not _cuda_mac(kernel):
        return False
    for a, ia, b, ib in re.findall(r"(\w+)\s*((?:\[[^\]]*\])+)\s*\*\s*(\w+)\s*((?:\[[^\]]*\])+)", kernel):
        if a != b and re.sub(r"\s+", "", ia) != re.sub(r"\s+", "", ib):
            return True
    return False


def _shared_tiling(v: SourceView) -> bool:
    return _per_backend(
        lambda v: any("__shared__" in k and "__syncthreads" in k and "for" in k for k in v.cuda_kernels),
        lambda v: any(_tl_dot_in_loop(k) for k in v.triton_kernels),
    )(v)


def _tensor_cores(v: SourceView) -> bool:
    return _per_backend(
        lambda v: _any(_CUDA["tensor_cores"], v.cuda),
        lambda v: any("tl.dot" in _tl_names(k) and (not _tl_ieee_only(k) or _low_precision(v))
                      for k in v.triton_kernels),  # fmt: skip
    )(v)


def _low_precision(v: SourceView) -> bool:
    triton = any(re.search(r"\btl\.(float16|bfloat16|float8\w*)\b", s) for s in v.triton_sources)
    return _any(_CUDA["low_precision"], v.cuda) or triton or _any(_HOST["low_precision"], v.host)


def _gemm_like(v: SourceView) -> bool:
    # A matrix-vector product is a reduction per output row, not a matrix product: no operand is reused across
    # outputs on chip, and tensor cores do not apply.
    return _per_backend(
        lambda v: any(_cuda_gemm(k) for k in v.cuda_kernels),
        lambda v: any("tl.dot" in _tl_names(k) or _tl_mac_loop(k) for k in v.triton_kernels),
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
            "tl.dot" in _tl_names(k) for k in v.triton_kernels
        )

    return _per_backend(cuda, triton)(v)


def _reduction(v: SourceView) -> bool:
    return _per_backend(
        lambda v: any(re.search(_CUDA["reduction"], k) or ("__shared__" in k and re.search(_CUDA["tree"], k))
                      for k in v.cuda_kernels),  # fmt: skip
        lambda v: any(_tl_reduces(k) for k in v.triton_kernels),
    )(v) or serial_reduction_loop(v)


def _stencil(v: SourceView) -> bool:
    def named(names: list[str]) -> bool:
        return any(re.search(r"conv|stencil|pool|laplac", n, re.IGNORECASE) for n in names)

    def cuda(v: SourceView) -> bool:
        names = re.findall(r"__global__\s+void\s+(\w+)", v.cuda)
        neighbours = any(re.search(r"[+-]\s*1\s*\]", k) and re.search(r"-\s*1\s*\]", k) for k in v.cuda_kernels)
        return named(names) or _cuda_window_loop(v.cuda) or neighbours

    def triton(v: SourceView) -> bool:
        window = any(re.search(r"\bfor\s+(kh|kw|ky|kx|kd|dy|dx|r|s)\s+in\b", s) for s in v.triton_sources)
        return named([k.name for k in v.triton_kernels]) or window

    return _per_backend(cuda, triton)(v)


_HALVING_STEP = re.compile(r">>=|<<=|/=|\*=|=\s*\w+\s*(?:>>|<<|/|\*)")


def _cuda_window_loop(cuda: str) -> bool:
    """A loop over a window index (kh, kw, dy, r, s...) stepping through the window; a loop over `s` that halves
    or doubles its step (for (s = blockDim.x / 2; s > 0; s >>= 1)) is a shared-memory reduction tree, not a window."""
    return any(not _HALVING_STEP.search(m.group(2)) for m in re.finditer(_CUDA["window_loop"], cuda))


def _transcendental_heavy(v: SourceView) -> bool:
    def triton(v: SourceView) -> bool:
        calls = [n for k in v.triton_kernels for n, _ in _tl_calls(k) if n.startswith("tl.")]
        return sum(1 for n in calls if n.split(".")[-1] in _TL_TRANSCENDENTAL) + sum(
            len(re.findall(r"libdevice\.\w+\(", s)) for s in v.triton_sources
        ) >= 2

    def cuda(v: SourceView) -> bool:  # the kernels and the __device__ helpers they call (a gelu(x) helper)
        code = v.cuda_kernels + v.cuda_device_functions
        return sum(len(re.findall(_CUDA["transcendental"], k)) for k in code) >= 2

    return _per_backend(cuda, triton)(v)


# Math functions whose unsuffixed name has a double overload: tanh(2.0 * x) runs the FP64 tanh (the argument is a
# double), where tanhf(...) or tanh(float) run in FP32.
_MATH_FN = re.compile(r"(?<![\w.])(tanh|exp|exp2|expm1|log|log2|log10|log1p|pow|sqrt|rsqrt|cbrt|erf|erfc|sin|cos|"
                      r"tan|sinh|cosh|asin|acos|atan|atan2|hypot|fmod)\s*\(")  # fmt: skip
# a floating literal without the f suffix (0.5, 2.0, 1e-5, .25), or a double constant macro of math.h
_DOUBLE_CONSTANT = re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+|\d+(?:\.\d*)?[eE][+-]?\d+)(?![\w.])|\bM_[A-Z0-9_]+\b")


def _cuda_fp64_math(v: SourceView) -> bool:
    kernels = v.cuda_kernels
    fp32_data = any(re.search(r"\bfloat\s*\*", k[: k.find("{")]) for k in kernels)
    if not fp32_data or any(re.search(r"\bdouble\s*\*", k[: k.find("{")]) for k in kernels):
        return False  # the data is FP64 itself (or not FP32): the double math is the problem's own
    for code in kernels + v.cuda_device_functions:
        doubles = set(re.findall(r"\bdouble\s+(\w+)", code))
        for m in _MATH_FN.finditer(code):
            arg, _ = parenthesized(code, m.end() - 1)
            if _DOUBLE_CONSTANT.search(arg) or re.search(r"\(\s*double\s*\)|<\s*double\s*>", arg) or any(
                re.search(rf"\b{d}\b", arg) for d in doubles
            ):  # fmt: skip
                return True
    return False


def _tl_fp64_math(v: SourceView) -> bool:
    return any("tl.float64" in src and any(n.split(".")[-1] in _TL_TRANSCENDENTAL for n in _tl_names(k))
               for k, src in zip(v.triton_kernels, v.triton_sources, strict=False))  # fmt: skip


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
        loads = any("tl.load" in _tl_names(k) for k in v.triton_kernels)
        return hinted or (loads and not any(_tl_strided_fast_axis(k) for k in v.triton_kernels))

    return _per_backend(lambda v: _any(_CUDA["vector"], v.cuda), triton)(v)


def _bounds(v: SourceView) -> bool:
    return _per_backend(lambda v: any(re.search(_CUDA["guard"], k) for k in v.cuda_kernels),
                        lambda v: any(_tl_masked(k) for k in v.triton_kernels))(v)  # fmt: skip


def _tail(v: SourceView) -> bool:
    return _per_backend(
        lambda v: _bounds(v) and (_any(_CUDA["ceil_div"], v.cuda, v.host) or _any(_CUDA["remainder"], v.cuda)),
        lambda v: _bounds(v) and (_any(r"\bcdiv\s*\(", v.text) or any(_loops(k) for k in v.triton_kernels)
                                  or _any(r"mask\s*=\s*[^,)]*<", *v.triton_sources)),
    )(v)


def _tl_rereads(k: ast.FunctionDef) -> bool:
    """The same pointer argument is loaded in two different loops (not nested in one another)."""
    params = {a.arg for a in k.args.args}
    top_loops = [n for n in ast.walk(k) if isinstance(n, ast.For | ast.While)
                 and not any(n is not o and any(m is n for m in ast.walk(o)) for o in _loops(k))]  # fmt: skip
    seen: dict[str, int] = {}
    for i, loop in enumerate(top_loops):
        for name, call in _tl_calls(loop):
            if name == "tl.load" and call.args:
                for n in ast.walk(call.args[0]):
                    if isinstance(n, ast.Name) and n.id in params and seen.setdefault(n.id, i) != i:
                        return True
    return False


def _cuda_rereads(kernel: str) -> bool:
    signature = kernel[: kernel.find("{")]
    pointers = set(re.findall(r"\*\s*(?:__restrict__\s+)?(\w+)\s*[,)]", signature))
    pointers |= set(re.findall(r"\w\s*\*\s*(?:const\s+)?(?:__restrict__\s+)?(\w+)\s*=", kernel))  # local aliases
    segments = re.split(r"\bfor\s*\(", kernel)[1:]  # text from each loop header to the next
    used = [{p for p in pointers if re.search(rf"\b{p}\s*\[", seg)} for seg in segments]
    return any(p in a and p in b for i, a in enumerate(used) for b in used[i + 1 :] for p in pointers)


def _params(kernel: str) -> list[str]:
    """The parameter names of a __global__ function, in order."""
    signature = kernel[kernel.find("(") + 1 : kernel.find("{")]
    signature = signature[: signature.rfind(")")]
    return [(re.findall(r"(\w+)\s*(?:\[\s*\])?\s*$", p.strip()) or [""])[0] for p in _split_args(signature)]


def _split_args(text: str, brackets: str = "([{<") -> list[str]:
    """`text` split at its top-level commas (template brackets count as brackets unless `brackets` says not)."""
    closing = {"(": ")", "[": "]", "{": "}", "<": ">"}
    parts, depth, last = [], 0, 0
    for j, c in enumerate(text):
        if c in brackets:
            depth += 1
        elif c in "".join(closing[b] for b in brackets):
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[last:j])
            last = j + 1
    return parts + [text[last:]] if text.strip() else parts


def _loop_reads(kernel: str) -> set[str]:
    """Parameters a kernel reads inside a for loop (p[...] not assigned to)."""
    found: set[str] = set()
    for m in re.finditer(r"\bfor\s*\(", kernel):
        _, after = parenthesized(kernel, m.end() - 1)
        body = statement_after(kernel, after)
        found |= set(re.findall(r"\b(\w+)\s*\[[^\]]*\](?!\s*(?:=(?!=)|\+=|-=|\*=|/=))", body))
    return found


def _cuda_rereads_across_kernels(v: SourceView) -> bool:
    """Two kernels launched by the host C++ each loop over the same tensor (a mean kernel, then a variance kernel
    over the same input): one more pass over the data, as a kernel reading its input in two loops."""
    kernels = {(re.findall(r"__global__\s+\w+\s+(\w+)\s*\(", k) or [""])[0]: k for k in v.cuda_kernels}
    readers: dict[str, set[str]] = {}
    for m in re.finditer(r"\b(\w+)\s*(?:<[^<>;]*>)?\s*<<<[^;]*?>>>\s*\(", v.cuda_host):
        kernel = kernels.get(m.group(1))
        if kernel is None:
            continue
        args, _ = parenthesized(v.cuda_host, m.end() - 1)
        read = _loop_reads(kernel)
        for param, arg in zip(_params(kernel), _split_args(args), strict=False):
            tensor = re.match(r"\s*(\w+)\s*\.\s*data_ptr", arg)
            if tensor and param in read:
                readers.setdefault(tensor.group(1), set()).add(m.group(1))
    return any(len(ks) >= 2 for ks in readers.values())


def _assignments(code: str) -> list[tuple[str, str]]:
    """(name, value) of each assignment, declarations of several names split (int r = ..., c = ...;)."""
    found = []
    for statement in re.split(r"[;{}]", code):
        for part in _split_args(statement, "(["):
            m = re.search(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*(.+)$", part.strip(), re.DOTALL)
            if m and not re.search(r"[<>!]$", part[: part.find("=")].rstrip()):
                found.append((m.group(1), m.group(2)))
    return found


def _lane_names(kernel: str) -> set[str]:
    """Names computed from threadIdx.x (directly or through such names): what neighbouring lanes differ in."""
    names: set[str] = set()
    assigns = _assignments(kernel)
    for _ in range(3):
        for name, value in assigns:
            if re.search(r"\bthreadIdx\.x\b", value) or any(re.search(rf"\b{n}\b", value) for n in names):
                names.add(name)
    return names


def _lane_strided(index: str, lanes: set[str]) -> bool:
    """Every lane name in the subscript is multiplied by a runtime size or a literal of 8 or more (i * N + j)."""
    found = [m for n in lanes for m in re.finditer(rf"\b{n}\b", index)]
    if not found:
        return False
    for m in found:
        before, after = index[: m.start()].rstrip(), index[m.end() :].lstrip()
        right = re.match(r"\)?\s*\*\s*\(?\s*([A-Za-z_]\w*|\d+)", after)
        left = re.search(r"([A-Za-z_]\w*|\d+)\s*\)?\s*\*\s*\(?$", before)
        factor = (right or left).group(1) if (right or left) else None
        if factor is None or factor in lanes or (factor.isdigit() and int(factor) < 8):
            return False
    return True


def _cuda_lane_strided_store(kernel: str) -> bool:
    pointers = set(re.findall(r"\*\s*(?:const\s+)?(?:__restrict__\s+)?(\w+)\s*[,)]", kernel[: kernel.find("{")]))
    lanes = _lane_names(kernel)
    stores = [i for a, i in re.findall(r"\b(\w+)\s*\[([^\]]*)\]\s*(?:=(?!=)|\+=)", kernel) if a in pointers]
    return bool(stores and lanes) and all(_lane_strided(i, lanes) for i in stores)


def _persistent(v: SourceView) -> bool:
    return _per_backend(
        lambda v: _any(_CUDA["sm_count"], v.cuda, v.host) or _any(_CUDA["grid_stride"], v.cuda),
        lambda v: _any(r"tl\.num_programs\(", *v.triton_sources) and any(_loops(k) for k in v.triton_kernels)
        or _any(_CUDA["sm_count"], v.text),
    )(v)


def _cuda_contended_atomics(kernel: str) -> bool:
    """An atomic per thread into an address many threads share: no shared memory or warp exchange combines values
    first, and the target is one fixed element (atomicAdd(out, v), &out[0]) or one reached through an integer
    division of the thread's index (&sum[i / D]: D consecutive threads, one address)."""
    if "__shared__" in kernel or re.search(_CUDA["warp"], kernel):
        return False
    assigns = dict(re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^;]+);", kernel))
    for m in re.finditer(r"\batomic(?:Add|Sub|Max|Min|Exch|CAS|And|Or|Xor|Inc|Dec)\w*\s*\(", kernel):
        address = _first_argument(kernel, m.end()).strip()
        if re.fullmatch(r"[A-Za-z_]\w*", address):
            return True
        element = re.fullmatch(r"&\s*\(?\s*[A-Za-z_]\w*\s*\[(.+)\]\s*\)?|[A-Za-z_]\w*\s*\+\s*(.+)", address)
        if element:
            index = (element.group(1) or element.group(2)).strip()
            if re.fullmatch(r"\d+", index) or "/" in index or "/" in assigns.get(index, ""):
                return True
    return False


def _first_argument(text: str, start: int) -> str:
    depth = 0
    for j in range(start, len(text)):
        c = text[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return text[start:j]
            depth -= 1
        elif c == "," and depth == 0:
            return text[start:j]
    return text[start:]


_TL_COMBINE = {"tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.xor_sum"}


def _tl_contended_atomics(k: ast.FunctionDef) -> bool:
    """tl.atomic_* to one address per program (no block offsets in the pointer) with a value no tl.sum/max/min
    combined first: every lane (or every scalar program) adds into the same element."""
    blocks = block_names(k)
    combined = {t.id for n in ast.walk(k) if isinstance(n, ast.Assign)
                and any(name in _TL_COMBINE or name in (".sum", ".max", ".min") for name, _ in _tl_calls(n.value))
                for t in n.targets if isinstance(t, ast.Name)}  # fmt: skip
    for name, call in _tl_calls(k):
        if not name.startswith("tl.atomic_") or len(call.args) < 2:
            continue
        pointer, value = call.args[0], call.args[-1] if name != "tl.atomic_cas" else call.args[2]
        one_address = "tl.arange" not in ast.unparse(pointer) and not _reads(pointer, blocks)
        reduced = any(n in _TL_COMBINE or n in (".sum", ".max", ".min") for n, _ in _tl_calls(value)) or _reads(
            value, combined
        )
        if one_address and not reduced:
            return True
    return False


_HALVING_FOR = re.compile(r"for\s*\([^;]*;[^;]*;\s*(\w+)\s*(?:>>=\s*1|/=\s*2|=\s*\1\s*(?:>>\s*1|/\s*2))\s*\)")


def _cuda_shared_tree(kernel: str) -> bool:
    """A loop halving its step (s >>= 1, s /= 2) that reads a __shared__ array at an index holding the step."""
    if "__syncthreads" not in kernel:
        return False
    shared = set(re.findall(r"__shared__[^;\[]*?(\w+)\s*\[", kernel))
    shared |= {a for a, b in re.findall(r"\*\s*(\w+)\s*=\s*(\w+)\b", kernel) if b in shared}  # float* s = sdata
    for m in _HALVING_FOR.finditer(kernel):
        body, step = statement_after(kernel, m.end()), m.group(1)
        if any(re.search(rf"\b{a}\s*\[[^\]]*\b{step}\b[^\]]*\]", body) for a in shared):
            return True
    return False


def _shared_tree(v: SourceView) -> bool:
    return v.backend == "cuda" and any(_cuda_shared_tree(k) for k in v.cuda_kernels)


def _host_sync(v: SourceView) -> bool:
    # cublasDestroy / cudnnDestroy synchronize the device: a handle destroyed in the launcher is a sync per forward
    return _any(_HOST["sync"], v.host) or _any(
        r"cudaDeviceSynchronize|cudaMemcpy\s*\(|\b(cublas|cublasLt|cudnn)Destroy\s*\(", v.cuda
    )


# a library product or convolution called from host code (C++ launcher): cuBLAS/cuDNN or ATen's own
_CPP_LIBRARY_CALL = re.compile(r"\b(?:cublas|cudnn)\w+\s*\(|\b(?:at|torch)::(?:matmul|mm|bmm|addmm|linear|conv\w*)\s*\("
                               r"|\.\s*(?:matmul|mm|bmm|addmm)\s*\(")  # fmt: skip


def _library_calls_in_host_loop(v: SourceView) -> bool:
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
        out.append((m.group(1), _split_args(args)))
    return out


def _kernel_params(kernel: str) -> list[tuple[str, bool]]:
    """(name, is_pointer) of each parameter of a __global__ function."""
    m = re.search(r"__global__[^(]*\(", kernel)
    if m is None:
        return []
    sig, _ = parenthesized(kernel, m.end() - 1)
    out = []
    for p in _split_args(sig):
        name = re.search(r"(\w+)\s*(?:\[\s*\])?\s*$", p)
        if name:
            out.append((name.group(1), "*" in p or "[" in p))
    return out


def _overwrites(kernel: str, param: str) -> bool:
    """Every thread's write to `param` is a plain store (param[i] = ...), none accumulates into what was there
    (+=, atomics, a read of param) and no store depends on loaded data (if (mask[i]) ...)."""
    body = kernel[kernel.find("{") :]
    stores = re.findall(rf"\b{param}\s*\[[^\]]*\]\s*(=|\+=|-=|\*=|/=|\|=|&=)(?!=)", body)
    if not stores or any(op != "=" for op in stores):
        return False
    if re.search(rf"\batomic\w*\s*\(\s*&?\s*{param}\b", body):
        return False
    reads = [m for m in re.finditer(rf"\b{param}\s*\[[^\]]*\]\s*(?!\s*=(?!=))", body)]
    if reads:
        return False
    for m in re.finditer(r"\bif\s*\(", body):
        cond, _ = parenthesized(body, m.end() - 1)
        if "[" in cond:
            return False
    return True


def _zero_filled_output(v: SourceView) -> bool:
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
        params = _kernel_params(kernel)
        for arg, (param, pointer) in zip(args, params, strict=False):
            base = re.match(r"\s*(?:\([^)]*\)\s*)?(\w+)", arg)
            if pointer and base and base.group(1) in filled and _overwrites(kernel, param):
                return True
    return False


_AFFINE_LEFT = re.compile(r"^[LC\s+\-*/()]*$")


def _cuda_affine_kernel(kernel: str) -> bool:
    """Every store writes an affine function of loaded elements with scalar parameters or literals
    (out[i] = s * y[i] + r[i], out[i] = x[i] - value): no function, comparison or product of two loads."""
    params = _kernel_params(kernel)
    scalars = {n for n, ptr in params if not ptr}
    pointers = {n for n, ptr in params if ptr}
    body = kernel[kernel.find("{") :]
    local = dict(_assignments(body))
    stores = [m for m in re.finditer(r"\b(\w+)\s*\[[^\]]*\]\s*=(?!=)\s*([^;]+);", body) if m.group(1) in pointers]
    if not stores:
        return False
    for m in stores:
        expr = m.group(2)
        for _ in range(3):  # substitute names computed in the kernel (float y = x[i]; out[i] = s * y)
            expr = re.sub(r"\b([A-Za-z_]\w*)\b(?!\s*[\[(])",
                          lambda t: f"({local[t.group(1)]})" if t.group(1) in local and t.group(1) not in pointers
                          else t.group(1), expr)  # fmt: skip
        expr = re.sub(r"\b\w+\s*\[[^\]]*\]", " L ", expr)
        expr = re.sub(r"\b\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[fF]?\b|\.\d+[fF]?\b", " C ", expr)
        expr = re.sub(r"\b\w+\b", lambda t: " C " if t.group(0) in scalars else t.group(0), expr)
        if not _AFFINE_LEFT.match(expr) or "L" not in expr or "C" not in expr:
            return False
        if re.search(r"L\s*[*/]\s*\(?\s*L|L\s*\)\s*[*/]\s*\(?\s*L|/\s*\(?\s*L", expr):  # product of loads
            return False
    return True


def _affine_epilogue(v: SourceView) -> bool:
    """After a library product in the forward (nn.Linear, a convolution, torch.matmul...), the candidate's kernels
    apply only an affine map with module constants to elements: a scale and shift that fold into the product's
    weights and bias at init, and an add that belongs in the product's epilogue."""
    return v.backend == "cuda" and v.library_product_before_kernel and bool(v.cuda_kernels) and all(
        _cuda_affine_kernel(k) for k in v.cuda_kernels
    )


RULES: dict[str, Rule] = {
    "backend": lambda v: v.backend,
    "kernel_count": lambda v: len(v.kernels),
    "launch_sites_per_forward": lambda v: v.launch_sites,
    "multiple_kernels_per_forward": lambda v: v.launch_sites > 1 or v.launch_in_loop,
    "shared_memory_tiling": _shared_tiling,
    "has_k_loop": _per_backend(lambda v: any(_cuda_mac(k) for k in v.cuda_kernels),
                               lambda v: any(_tl_mac_loop(k) or _tl_dot_in_loop(k) for k in v.triton_kernels)),
    "uses_tensor_cores": _tensor_cores,
    "low_precision_dtype": _low_precision,
    "vectorized_access": _vectorized,
    "bounds_checks": _bounds,
    "tail_handling": _tail,
    "pointwise": _pointwise,
    "transcendental_heavy": _transcendental_heavy,
    "gemm_like": _gemm_like,
    "naive_gemm": lambda v: _gemm_like(v) and not _shared_tiling(v) and not _tensor_cores(v)
    and not any("tl.dot" in _tl_names(k) for k in v.triton_kernels),
    "stencil_or_conv": _stencil,
    "reduction": _reduction,
    "rereads_input": _per_backend(lambda v: any(_cuda_rereads(k) for k in v.cuda_kernels)
                                  or _cuda_rereads_across_kernels(v),
                                  lambda v: any(_tl_rereads(k) for k in v.triton_kernels)),  # fmt: skip
    "fp64_math_on_fp32_data": _per_backend(_cuda_fp64_math, _tl_fp64_math),
    "host_reduces_kernel_output": lambda v: v.backend in ("cuda", "triton") and v.host_reduces_kernel_output,
    "lane_strided_store": _per_backend(
        lambda v: any(_cuda_lane_strided_store(k) for k in v.cuda_kernels),
        lambda v: any(_tl_strided_fast_axis(k, ("tl.store",)) for k in v.triton_kernels),
    ),
    "warp_level_primitives": _per_backend(lambda v: _any(_CUDA["warp"], v.cuda),
                                          lambda v: any(_tl_reduces(k) for k in v.triton_kernels)),
    "atomics": _per_backend(lambda v: _any(_CUDA["atomics"], v.cuda),
                            lambda v: any(n.startswith("tl.atomic_") for k in v.triton_kernels for n in _tl_names(k))),
    "uses_cuda_graphs": lambda v: _any(_HOST["graphs"], v.text, v.cuda),
    "host_sync_in_forward": _host_sync,
    "cuda_graph_eligible": lambda v: not _host_sync(v) and not _any(_HOST["dynamic_shape"], v.host),
    "autotuned": _per_backend(lambda v: _any(_CUDA["occupancy_api"], v.cuda),
                              lambda v: _any(r"triton\.autotune\b|@autotune\b", v.text)),
    "persistent_grid": _persistent,
    "software_pipelined": _per_backend(
        lambda v: _any(_CUDA["pipelined"], v.cuda),
        lambda v: _any(r"num_stages\s*=\s*([2-9]|\d\d)|make_tensor_descriptor|TensorDescriptor", v.text),
    ),
    "calls_vendor_library": lambda v: _any(_HOST["vendor"], v.host) or _any(_CUDA["vendor"], v.cuda),
    "register_tiling": _register_tiling,
    "contended_atomics": _per_backend(lambda v: any(_cuda_contended_atomics(k) for k in v.cuda_kernels),
                                      lambda v: any(_tl_contended_atomics(k) for k in v.triton_kernels)),
    "shared_memory_tree": _shared_tree,
    "library_calls_in_host_loop": _library_calls_in_host_loop,
    "zero_filled_output": lambda v: v.backend == "cuda" and _zero_filled_output(v),
    "affine_epilogue": _affine_epilogue,
    "launches_after_library_product": lambda v: v.launches_after_library_product,
    **SERIAL_RULES,
}  # fmt: skip
