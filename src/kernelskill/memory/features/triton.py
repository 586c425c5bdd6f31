"""Triton rule helpers: what a @triton.jit kernel does, read from its Python syntax tree (tl.dot in a loop, a masked
load, a strided fastest axis, an atomic into one address...). The rules in rules.py combine them per feature."""

from __future__ import annotations

import ast
import re

from kernelskill.memory.features.codeview import SourceView
from kernelskill.memory.features.serial import block_names


_TL_REDUCE = {"sum", "max", "min", "reduce", "argmax", "argmin", "xor_sum", "cumsum", "cumprod", "associative_scan"}


TL_TRANSCENDENTAL = {"exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "sqrt_rn", "rsqrt", "sigmoid", "erf",
                      "tanh", "pow", "fast_expf", "fast_logf"}  # fmt: skip


def tl_calls(node: ast.AST) -> list[tuple[str, ast.Call]]:
    """('tl.dot', call) for calls on the tl module; ('.sum', call) for tensor methods."""
    out = []
    for c in ast.walk(node):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute):
            base = ast.unparse(c.func.value)
            is_tl = base in ("tl", "triton.language", "tl.math", "libdevice", "tl.extra.cuda.libdevice")
            out.append(((f"tl.{c.func.attr}" if is_tl else f".{c.func.attr}"), c))
    return out


def tl_names(node: ast.AST) -> set[str]:
    return {name for name, _ in tl_calls(node)}


def loops(node: ast.AST) -> list[ast.For | ast.While]:
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


def tl_dot_in_loop(k: ast.FunctionDef) -> bool:
    return any("tl.dot" in tl_names(loop) for loop in loops(k))


def tl_mac_loop(k: ast.FunctionDef) -> bool:
    return any(_is_mac(n) for loop in loops(k) for n in ast.walk(loop))


def tl_ieee_only(k: ast.FunctionDef) -> bool:
    dots = [c for name, c in tl_calls(k) if name == "tl.dot"]
    for c in dots:
        kws = {kw.arg: ast.unparse(kw.value) for kw in c.keywords}
        if kws.get("input_precision", "").strip("'\"") != "ieee" and kws.get("allow_tf32") != "False":
            return False
    return bool(dots)


def tl_strided_fast_axis(k: ast.FunctionDef, calls: tuple[str, ...] = ("tl.load", "tl.store")) -> bool:
    """A load/store pointer whose fastest axis is a tl.arange scaled by a stride (not contiguous)."""
    derived: set[str] = set()
    for n in ast.walk(k):  # names computed from tl.arange (one pass in source order is enough for kernels)
        if isinstance(n, ast.Assign) and ("tl.arange" in ast.unparse(n.value) or _reads(n.value, derived)):
            derived |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    for name, call in tl_calls(k):
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


def tl_masked(k: ast.FunctionDef) -> bool:
    for name, call in tl_calls(k):
        if name in ("tl.load", "tl.store") and (len(call.args) >= 3 or any(
            kw.arg in ("mask", "boundary_check") for kw in call.keywords
        )):  # fmt: skip
            return True
    return False


def tl_reduces(k: ast.FunctionDef) -> bool:
    return any(name.split(".")[-1] in _TL_REDUCE for name in tl_names(k))


def tl_fp64_math(v: SourceView) -> bool:
    return any("tl.float64" in src and any(n.split(".")[-1] in TL_TRANSCENDENTAL for n in tl_names(k))
               for k, src in zip(v.triton_kernels, v.triton_sources, strict=False))  # fmt: skip


def tl_rereads(k: ast.FunctionDef) -> bool:
    """The same pointer argument is loaded in two different loops (not nested in one another)."""
    params = {a.arg for a in k.args.args}
    top_loops = [n for n in ast.walk(k) if isinstance(n, ast.For | ast.While)
                 and not any(n is not o and any(m is n for m in ast.walk(o)) for o in loops(k))]  # fmt: skip
    seen: dict[str, int] = {}
    for i, loop in enumerate(top_loops):
        for name, call in tl_calls(loop):
            if name == "tl.load" and call.args:
                for n in ast.walk(call.args[0]):
                    if isinstance(n, ast.Name) and n.id in params and seen.setdefault(n.id, i) != i:
                        return True
    return False


_TL_COMBINE = {"tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.xor_sum"}


def tl_contended_atomics(k: ast.FunctionDef) -> bool:
    """tl.atomic_* to one address per program (no block offsets in the pointer) with a value no tl.sum/max/min
    combined first: every lane (or every scalar program) adds into the same element."""
    blocks = block_names(k)
    combined = {t.id for n in ast.walk(k) if isinstance(n, ast.Assign)
                and any(name in _TL_COMBINE or name in (".sum", ".max", ".min") for name, _ in tl_calls(n.value))
                for t in n.targets if isinstance(t, ast.Name)}  # fmt: skip
    for name, call in tl_calls(k):
        if not name.startswith("tl.atomic_") or len(call.args) < 2:
            continue
        pointer, value = call.args[0], call.args[-1] if name != "tl.atomic_cas" else call.args[2]
        one_address = "tl.arange" not in ast.unparse(pointer) and not _reads(pointer, blocks)
        reduced = any(n in _TL_COMBINE or n in (".sum", ".max", ".min") for n, _ in tl_calls(value)) or _reads(
            value, combined
        )
        if one_address and not reduced:
            return True
    return False
