"""CUDA rule helpers: what a __global__ kernel does, read with regular expressions over its comment-free C++ text
(a multiply-accumulate loop, a shared-memory reduction tree, a lane-strided store, contended atomics...). The rules
in rules.py combine them per feature."""

from __future__ import annotations

import re

from kernelskill.memory.features.codeview import SourceView
from kernelskill.memory.features.serial import parenthesized, statement_after


CUDA_PATTERNS = {
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


def cuda_mac(kernel: str) -> bool:
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


def cuda_gemm(kernel: str) -> bool:
    if re.search(CUDA_PATTERNS["tensor_cores"], kernel):
        return True
    # two different arrays multiplied inside an accumulation at different positions: acc += A[..] * B[..] (or
    # As[..][..] * Bs[..][..]); a[i * n + j] * b[i * n + j] is an elementwise product summed (a row-wise dot
    # product, cosine similarity), not a matrix product
    if not cuda_mac(kernel):
        return False
    for a, ia, b, ib in re.findall(r"(\w+)\s*((?:\[[^\]]*\])+)\s*\*\s*(\w+)\s*((?:\[[^\]]*\])+)", kernel):
        if a != b and re.sub(r"\s+", "", ia) != re.sub(r"\s+", "", ib):
            return True
    return False


_HALVING_STEP = re.compile(r">>=|<<=|/=|\*=|=\s*\w+\s*(?:>>|<<|/|\*)")


def cuda_window_loop(cuda: str) -> bool:
    """A loop over a window index (kh, kw, dy, r, s...) stepping through the window; a loop over `s` that halves
    or doubles its step (for (s = blockDim.x / 2; s > 0; s >>= 1)) is a shared-memory reduction tree, not a window."""
    return any(not _HALVING_STEP.search(m.group(2)) for m in re.finditer(CUDA_PATTERNS["window_loop"], cuda))


# Math functions whose unsuffixed name has a double overload: tanh(2.0 * x) runs the FP64 tanh (the argument is a
# double), where tanhf(...) or tanh(float) run in FP32.
_MATH_FN = re.compile(r"(?<![\w.])(tanh|exp|exp2|expm1|log|log2|log10|log1p|pow|sqrt|rsqrt|cbrt|erf|erfc|sin|cos|"
                      r"tan|sinh|cosh|asin|acos|atan|atan2|hypot|fmod)\s*\(")  # fmt: skip


# a floating literal without the f suffix (0.5, 2.0, 1e-5, .25), or a double constant macro of math.h
_DOUBLE_CONSTANT = re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+|\d+(?:\.\d*)?[eE][+-]?\d+)(?![\w.])|\bM_[A-Z0-9_]+\b")


def cuda_fp64_math(v: SourceView) -> bool:
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


def cuda_rereads(kernel: str) -> bool:
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
    return [(re.findall(r"(\w+)\s*(?:\[\s*\])?\s*$", p.strip()) or [""])[0] for p in split_args(signature)]


def split_args(text: str, brackets: str = "([{<") -> list[str]:
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


def cuda_rereads_across_kernels(v: SourceView) -> bool:
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
        for param, arg in zip(_params(kernel), split_args(args), strict=False):
            tensor = re.match(r"\s*(\w+)\s*\.\s*data_ptr", arg)
            if tensor and param in read:
                readers.setdefault(tensor.group(1), set()).add(m.group(1))
    return any(len(ks) >= 2 for ks in readers.values())


def _assignments(code: str) -> list[tuple[str, str]]:
    """(name, value) of each assignment, declarations of several names split (int r = ..., c = ...;)."""
    found = []
    for statement in re.split(r"[;{}]", code):
        for part in split_args(statement, "(["):
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


def cuda_lane_strided_store(kernel: str) -> bool:
    pointers = set(re.findall(r"\*\s*(?:const\s+)?(?:__restrict__\s+)?(\w+)\s*[,)]", kernel[: kernel.find("{")]))
    lanes = _lane_names(kernel)
    stores = [i for a, i in re.findall(r"\b(\w+)\s*\[([^\]]*)\]\s*(?:=(?!=)|\+=)", kernel) if a in pointers]
    return bool(stores and lanes) and all(_lane_strided(i, lanes) for i in stores)


def cuda_contended_atomics(kernel: str) -> bool:
    """An atomic per thread into an address many threads share: no shared memory or warp exchange combines values
    first, and the target is one fixed element (atomicAdd(out, v), &out[0]) or one reached through an integer
    division of the thread's index (&sum[i / D]: D consecutive threads, one address)."""
    if "__shared__" in kernel or re.search(CUDA_PATTERNS["warp"], kernel):
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


_HALVING_FOR = re.compile(r"for\s*\([^;]*;[^;]*;\s*(\w+)\s*(?:>>=\s*1|/=\s*2|=\s*\1\s*(?:>>\s*1|/\s*2))\s*\)")


def cuda_shared_tree(kernel: str) -> bool:
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


def kernel_params(kernel: str) -> list[tuple[str, bool]]:
    """(name, is_pointer) of each parameter of a __global__ function."""
    m = re.search(r"__global__[^(]*\(", kernel)
    if m is None:
        return []
    sig, _ = parenthesized(kernel, m.end() - 1)
    out = []
    for p in split_args(sig):
        name = re.search(r"(\w+)\s*(?:\[\s*\])?\s*$", p)
        if name:
            out.append((name.group(1), "*" in p or "[" in p))
    return out


def overwrites(kernel: str, param: str) -> bool:
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


_AFFINE_LEFT = re.compile(r"^[LC\s+\-*/()]*$")


def cuda_affine_kernel(kernel: str) -> bool:
    """Every store writes an affine function of loaded elements with scalar parameters or literals
    (out[i] = s * y[i] + r[i], out[i] = x[i] - value): no function, comparison or product of two loads."""
    params = kernel_params(kernel)
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
