"""Where a slow kernel's time goes: serial work per thread (code features of knowledge/code_features.yaml).

LLM-written kernels are most often slow because one thread walks a whole row alone: a softmax or layernorm with one
thread per row, a prefix sum in a loop, a matrix-vector product with a thread per output. Their metrics look like
scattered accesses or low occupancy (the threads of a warp read different rows; a grid of a few thousand threads
cannot fill the GPU), but the cure is a parallel reduction or scan, not a new layout. These rules find the pattern:

- serial_reduction_loop: a loop over a runtime-length dimension, one element per iteration, that folds what it
  reads into a scalar (s += x[j], m = fmaxf(m, x[j]), acc += a[j] * b[j]), in a kernel whose threads do not
  cooperate (CUDA: no __shared__, warp shuffles or atomics; Triton: the loop loads scalars, not blocks);
- serial_scan: such a loop that also stores the running value at each step (prefix sums, cumulative products), or
  one that sums its own output's prefix: a thread per output whose loop runs up to that output's position (each
  prefix recomputed, O(n^2) work for a cumsum);
- matvec_like: the folded product multiplies a matrix element by a vector element indexed by the loop alone.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import NamedTuple

from kernelskill.memory.codeview import SourceView

_COOPERATION = re.compile(r"__shared__|__shfl\w*_sync|__reduce_\w+_sync|cg::|cooperative_groups|\batomic\w+\s*\(|"
                          r"\bcub::|\b(Block|Warp)Reduce\b")  # fmt: skip
# for (int j = 0; j < n; j++) / ++j / j += 1 - one element per iteration, up to a runtime bound (a name) or a
# literal one of at least MIN_SERIAL_TRIP (j < 4096 walks a row; k < 3 is a window)
_SERIAL_FOR = re.compile(r"for\s*\(\s*(?:int|unsigned|size_t|int64_t|long)?\s*(\w+)\s*=[^;]*;\s*\1\s*<=?\s*"
                         r"(?:[A-Za-z_][\w.\->]*[^;]*|(?P<trip>\d+)\s*);"
                         r"\s*(?:\1\s*\+\+|\+\+\s*\1|\1\s*\+=\s*1\b)\s*\)")  # fmt: skip
MIN_SERIAL_TRIP = 64


# Window indices of pooling, convolution and stencils: a loop over a small window is not a serial row walk.
_WINDOW_VARS = {"kh", "kw", "ky", "kx", "kd", "dy", "dx", "fy", "fx", "r", "s", "ki", "kj"}


def _statement_after(text: str, pos: int) -> str:
    """The loop body starting at `pos`: a balanced {...} block or one statement up to ';'."""
    i = pos
    while i < len(text) and text[i].isspace():
        i += 1
    if i < len(text) and text[i] == "{":
        depth = 0
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[i : j + 1]
        return text[i:]
    end = text.find(";", i)
    return text[i : end + 1 if end >= 0 else len(text)]


class SerialLoop(NamedTuple):
    var: str  # the loop variable
    along: str  # it and the names the body computes from it, as a regex alternative (int index = row + i)
    bound: str  # what the loop runs up to, as written
    acc: str  # the scalar it folds into
    body: str


def _cuda_serial_loops(kernel: str) -> Iterator[SerialLoop]:
    """Every serial folding loop of a non-cooperating CUDA kernel."""
    if _COOPERATION.search(kernel):
        return
    for m in _SERIAL_FOR.finditer(kernel):
        var, body = m.group(1), _statement_after(kernel, m.end())
        if var in _WINDOW_VARS or (m.group("trip") and int(m.group("trip")) < MIN_SERIAL_TRIP):
            continue
        along = _along(body, var)
        if not re.search(rf"\w+\s*\[[^\]]*\b(?:{along})\b[^\]]*\]", body):
            continue  # the loop does not read along its index
        bound = re.search(rf";\s*{var}\s*<=?\s*([^;]*);", m.group(0)).group(1).strip()
        for acc in _accumulators(body, var):
            yield SerialLoop(var, along, bound, acc, body)


def _along(body: str, var: str) -> str:
    """A regex alternative of the loop variable and the names the body computes from it (int index = row + i)."""
    names = [var] + [n for n, value in re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^;]+);", body)
                     if re.search(rf"\b{var}\b", value) and n != var]
    return "|".join(dict.fromkeys(names))


def _accumulators(body: str, var: str) -> list[str]:
    found = []
    for acc in re.findall(r"(?<![\w\]\.])([A-Za-z_]\w*)\s*(?:\+=|\*=|-=)", body):
        if acc != var:
            found.append(acc)
    for acc, fn in re.findall(r"(?<![\w\]\.])([A-Za-z_]\w*)\s*=\s*(fmaxf?|fminf?|max|min)\s*\(\s*\1\b", body):
        if acc != var:
            found.append(acc)
    return list(dict.fromkeys(found))


_POSITION = re.compile(r"\b(?:threadIdx|blockIdx)\.[xyz]\b")


def _position_names(kernel: str) -> set[str]:
    """Variables computed from the thread's position (threadIdx/blockIdx), directly or through other such names."""
    names: set[str] = set()
    assigns = re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^;]+);", kernel)
    for _ in range(3):
        for name, value in assigns:
            if _POSITION.search(value) or any(re.search(rf"\b{n}\b", value) for n in names):
                names.add(name)
    return names


def _cuda_scan(kernel: str) -> bool:
    positions = _position_names(kernel)
    for loop in _cuda_serial_loops(kernel):
        if re.search(rf"\w+\s*\[[^\]]*\b(?:{loop.along})\b[^\]]*\]\s*=\s*[^;=]*\b{loop.acc}\b", loop.body):
            return True
        if loop.bound in positions:  # a thread per output summing its own prefix: it runs up to its own position
            return True
    return False


def _cuda_matvec(kernel: str) -> bool:
    for loop in _cuda_serial_loops(kernel):
        vector = rf"\w+\s*\[\s*{loop.var}\s*\]"  # indexed by the loop variable alone
        matrix = rf"\w+\s*\[[^\]]*\b(?:{loop.along})\b[^\]]*\]"
        if re.search(rf"\b{loop.acc}\s*\+=\s*(?:{vector}\s*\*\s*{matrix}|{matrix}\s*\*\s*{vector})", loop.body):
            return True
    return False


# ---- Triton: a loop over scalars ------------------------------------------------------------------------------------


def _block_names(k: ast.FunctionDef) -> set[str]:
    """Names computed (directly or not) from tl.arange: block-valued offsets."""
    names: set[str] = set()
    for _ in range(3):  # a few passes reach names derived from derived names
        for n in ast.walk(k):
            if isinstance(n, ast.Assign | ast.AugAssign):
                value = n.value
                reads = {x.id for x in ast.walk(value) if isinstance(x, ast.Name)}
                if "tl.arange" in ast.unparse(value) or reads & names:
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _triton_serial_loops(k: ast.FunctionDef) -> Iterator[tuple[ast.For, str]]:
    blocks = _block_names(k)
    for loop in (n for n in ast.walk(k) if isinstance(n, ast.For)):
        loads = [c for c in ast.walk(loop) if isinstance(c, ast.Call) and ast.unparse(c.func) == "tl.load" and c.args]
        if not loads or any("tl.arange" in ast.unparse(c.args[0]) or
                            {x.id for x in ast.walk(c.args[0]) if isinstance(x, ast.Name)} & blocks
                            for c in loads):  # fmt: skip
            continue  # block loads: the program already works on many elements per step
        for n in ast.walk(loop):
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                yield loop, n.target.id
            elif (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                  and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) in ("tl.maximum", "tl.minimum")
                  and n.targets[0].id in {ast.unparse(a) for a in n.value.args}):  # fmt: skip
                yield loop, n.targets[0].id


def _triton_scan(k: ast.FunctionDef) -> bool:
    for loop, acc in _triton_serial_loops(k):
        for c in ast.walk(loop):
            if isinstance(c, ast.Call) and ast.unparse(c.func) == "tl.store" and len(c.args) >= 2:
                if any(isinstance(x, ast.Name) and x.id == acc for x in ast.walk(c.args[1])):
                    return True
    return False


def _triton_matvec(k: ast.FunctionDef) -> bool:
    for loop, acc in _triton_serial_loops(k):
        loop_var = ast.unparse(loop.target)
        for n in ast.walk(loop):
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == acc:
                loads = [c for c in ast.walk(n.value) if isinstance(c, ast.Call) and ast.unparse(c.func) == "tl.load"]
                pointers = [ast.unparse(c.args[0]).replace(" ", "") for c in loads if c.args]
                if len(pointers) >= 2 and any(re.fullmatch(rf"\w+\+{loop_var}|{loop_var}\+\w+", p) for p in pointers):
                    return True
    return False


def serial_reduction_loop(v: SourceView) -> bool:
    if v.backend == "cuda":
        return any(any(True for _ in _cuda_serial_loops(k)) for k in v.cuda_kernels)
    if v.backend == "triton":
        return any(any(True for _ in _triton_serial_loops(k)) for k in v.triton_kernels)
    return False


def serial_scan(v: SourceView) -> bool:
    if v.backend == "cuda":
        return any(_cuda_scan(k) for k in v.cuda_kernels)
    if v.backend == "triton":
        return any(_triton_scan(k) for k in v.triton_kernels)
    return False


def matvec_like(v: SourceView) -> bool:
    if v.backend == "cuda":
        return any(_cuda_matvec(k) for k in v.cuda_kernels)
    if v.backend == "triton":
        return any(_triton_matvec(k) for k in v.triton_kernels)
    return False


SERIAL_RULES = {"serial_reduction_loop": serial_reduction_loop, "serial_scan": serial_scan, "matvec_like": matvec_like}
