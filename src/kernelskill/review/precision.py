"""How honest a correct verdict is about numerics: the dtypes a candidate computes in (read from its source, and
from the names of the library kernels it launched in the profiled trial), a strict tolerance besides the configured
one, the TF32 settings the reference ran under, and the input distributions the verify trials use besides
get_inputs()' own.

The static part runs in the reviewer, never in the worker that ran candidate code; the rest is measured by the
verify stage (worker/verify.py) from the outputs it compares anyway.
"""

from __future__ import annotations

import ast
import re

from kernelskill.review.results import Precision

STRICT_TOL = 1e-4  # KernelBench's current default atol = rtol
LOW_PRECISION = ("float16", "bfloat16", "float8", "tf32")

# dtype -> patterns over the source, Python comments removed (CUDA sources are string literals in it)
_DTYPES = {
    "float16": r"\.half\(\)|\btorch\.(float16|half)\b|\btl\.float16\b|\b__half2?\b|\bhalf2?\b|\bat::Half\b"
               r"|\bkHalf\b|\bkFloat16\b|\b__float2half\w*|\bwmma::|\bmma_sync\b|\bmma\.sync\.\w*\.f16",
    "bfloat16": r"\.bfloat16\(\)|\btorch\.bfloat16\b|\btl\.bfloat16\b|\b__nv_bfloat162?\b|\bnv_bfloat162?\b"
                r"|\bat::BFloat16\b|\bkBFloat16\b|\b__float2bfloat16\w*|\.bf16\b",
    "float8": r"\btorch\.float8\w*|\btl\.float8\w*|\b__nv_fp8\w*|\.e4m3\b|\.e5m2\b",
    "tf32": r"\ballow_tf32\s*=\s*True\b|input_precision\s*=\s*[\"']tf32[\"']|\bwmma::precision::tf32\b"
            r"|\.tf32\b|__float_to_tf32|set_float32_matmul_precision\s*\(\s*[\"'](high|medium)[\"']",
}
_C_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_TL_DOT = re.compile(r"\btl\.dot\s*\(")
# torch.autocast / torch.amp.autocast / torch.cuda.amp.autocast: on CUDA fp16 unless its dtype says bf16
_AUTOCAST = re.compile(r"\bautocast\s*\(")


class _Strings(ast.NodeTransformer):
    """Drops docstrings and other bare string statements; keeps multi-line strings' text apart (CUDA sources)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return ast.Pass()
        return self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant):
        if isinstance(node.value, str) and "\n" in node.value:  # a source; short strings stay (input_precision=)
            self.texts.append(_C_COMMENTS.sub("", node.value))
            return ast.Constant("")
        return node


def _code_text(source: str) -> str:
    """The source without comments and docstrings: its Python code, then its string literals' text with C/C++
    comments removed (a commented-out `half` or a docstring saying "half" does not count)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return _C_COMMENTS.sub("", source)
    strings = _Strings()
    code = ast.unparse(strings.visit(tree))
    return "\n".join([code, *strings.texts])


def _calls(pattern: re.Pattern, text: str) -> list[str]:
    """The argument text of each call `pattern` finds (it matches up to the opening parenthesis)."""
    calls = []
    for m in pattern.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        calls.append(text[m.end():i - 1])
    return calls


def compute_dtypes(source: str) -> list[str]:
    """The reduced-precision dtypes the candidate's code computes in where the source shows them. A Triton tl.dot
    counts as TF32 unless it asks for IEEE fp32 (Triton's default for fp32 operands on NVIDIA GPUs is TF32); an
    autocast region as fp16 (its default on CUDA) unless it names bf16 or is switched off."""
    text = _code_text(source)
    found = [name for name, pattern in _DTYPES.items() if re.search(pattern, text)]
    for args in _calls(_AUTOCAST, text):
        if re.search(r"\benabled\s*=\s*False\b", args):
            continue
        dtype = "bfloat16" if re.search(r"\bbfloat16\b", args) else "float16"
        if dtype not in found:
            found.append(dtype)
    if "tf32" not in found and any(not re.search(r"input_precision\s*=\s*[\"'](ieee|tf32x3)[\"']"
                                                 r"|allow_tf32\s*=\s*False", args) for args in _calls(_TL_DOT, text)):
        found.append("tf32")
    return [name for name in _DTYPES if name in found]


def tf32_settings(torch) -> dict[str, bool | str]:
    """The switches that let PyTorch compute fp32 matmuls and convolutions in TF32."""
    return {"cuda.matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}


# The verify trials' input distributions after get_inputs()' own ("normal"): every floating-point input tensor
# scaled, then shifted. Integer and bool inputs, and plain Python values, are left as they are.
DISTRIBUTIONS = {"scaled x10": lambda t: t * 10, "offset +5": lambda t: t + 5}


def distributed(inputs: list, name: str, torch) -> list:
    if name == "normal":
        return inputs
    fn = DISTRIBUTIONS[name]
    return [fn(v) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs]


# dtype -> patterns over the names of the GPU kernels the candidate launched (the profiled verify trial): what the
# vendor libraries' kernels say they compute in. Seen on the H200 (CUDA-L1's kernels, docs/h200/kernelbench):
# cuBLAS/cuDNN `sm90_xmma_gemm_f32f32_tf32f32_f32_...`, `sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_...`, CUTLASS
# `cutlass_80_tensorop_s1688gemm_...` (fp32 data on the m16n8k8 TF32 tensor-core instruction), cuBLAS's nvjet
# `nvjet_sm90_hsh_...` (a VGG16 candidate that called .half()), cuDNN `...<__half, __half, float, ...>`. A plain
# fp32 kernel (`..._f32f32_f32f32_f32_..._ffma_...`, `cutlass_80_simt_sgemm_...`) matches none.
_KERNEL_DTYPES = {
    "tf32": r"tf32|tensorop_s1688",
    "bfloat16": r"bf16|__nv_bfloat16|BFloat16",
    "float16": r"(?<!b)f16(?!x)|__half\b|\bhalf\b|c10::Half|nvjet_sm\d+_hs|tensorop_h\d",
    "float8": r"e4m3|e5m2|fp8",
}


def kernel_dtypes(names) -> list[str]:
    """The reduced-precision dtypes the names of launched GPU kernels show (vendor libraries name their math)."""
    found = []
    for dtype, pattern in _KERNEL_DTYPES.items():
        if any(re.search(pattern, name) for name in names):
            found.append(dtype)
    return found


def nonfinite(out, torch) -> tuple[int, int]:
    """(non-finite elements, all elements) over a forward's floating-point output tensors."""
    from kernelskill.review.compare import flatten_outputs

    bad = total = 0
    for t in flatten_outputs(out):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            bad += int((~torch.isfinite(t)).sum())
            total += t.numel()
    return bad, total


def settle(measured: Precision | None, dtypes: list[str], verified: bool, kernels=()) -> Precision:
    """The review's precision record: what verify measured, the dtypes seen in the code and those the launched
    kernels' names show (`kernels`: the profiled trial's GPU kernel names); `reduced_precision` when an fp32 problem's
    candidate passed the configured tolerance but not the strict one and its code or its kernels compute in less."""
    p = (measured or Precision()).model_copy(update={"compute_dtypes": dtypes,
                                                     "kernel_dtypes": kernel_dtypes(kernels)})
    p.reduced_precision = bool(verified and p.output_dtypes and set(p.output_dtypes) == {"float32"}
                               and p.strict_tolerance_ok is False
                               and (set(dtypes) | set(p.kernel_dtypes)) & set(LOW_PRECISION))
    return p
