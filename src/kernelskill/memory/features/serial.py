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
- matvec_like: the folded product multiplies a matrix element by a vector element indexed by the loop alone;
- strided_reduction_axis: the innermost such loop multiplies its variable by a stride wherever it reads (a sum over
  dim 1): neighbouring threads already read neighbouring addresses, and a warp per output would not.

A loop over a window around the thread's position (up to kernel_size, or with a coordinate tested against 0 for
padding) is none of these. Two more rules find work no output needs:

- recomputed_reduction: after such a loop the thread writes one output combining the statistic with one element
  of the same input (out[idx] = x[idx] / rms): every output of the row recomputes the row's statistic;
- discarded_thread_results: the only stores sit under a `p % s == 0` test of the thread's position, so the threads
  that fail it (three quarters of a stride-2 pooling's) computed for nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import NamedTuple

from kernelskill.memory.features.codeview import SourceView

_COOPERATION = re.compile(r"__shared__|__shfl\w*_sync|__reduce_\w+_sync|cg::|cooperative_groups|\batomic\w+\s*\(|"
                          r"\bcub::|\b(Block|Warp)Reduce\b")  # fmt: skip
# for (int j = 0; j < n; j++) / ++j / j += 1 - one element per iteration, up to a runtime bound (a name) or a
# literal one of at least MIN_SERIAL_TRIP (j < 4096 walks a row; k < 3 is a window)
_SERIAL_FOR = re.compile(r"for\s*\(\s*(?:int|unsigned|size_t|int64_t|long)?\s*(\w+)\s*=[^;]*;\s*\1\s*<=?\s*"
                         r"(?:[A-Za-z_][\w.\->]*[^;]*|(?P<trip>\d+)\s*);"
                         r"\s*(?:\1\s*\+\+|\+\+\s*\1|\1\s*\+=\s*1\b)\s*\)")  # fmt: skip
# the same walk backwards: for (int j = n - 1; j >= 0; --j) - a reversed scan or suffix sum walks its row as serially
# (the bound is then the start, n - 1, a runtime expression or a literal of at least MIN_SERIAL_TRIP)
_SERIAL_FOR_DOWN = re.compile(r"for\s*\(\s*(?:int|unsigned|size_t|int64_t|long)?\s*(\w+)\s*=\s*"
                              r"(?:(?P<start>[A-Za-z_][\w.\->]*[^;]*)|(?P<trip>\d+)\s*);"
                              r"\s*\1\s*(?:>=\s*0|>\s*-\s*1)\s*;"
                              r"\s*(?:\1\s*--|--\s*\1|\1\s*-=\s*1\b)\s*\)")  # fmt: skip
MIN_SERIAL_TRIP = 64


# Window indices of pooling, convolution and stencils: a loop over a small window is not a serial row walk.
_WINDOW_VARS = {"kh", "kw", "ky", "kx", "kd", "dy", "dx", "fy", "fx", "r", "s", "ki", "kj"}
# Bounds that name a window's size (kernel_size, ksize, kH, window, pool_size, filter_w...): a loop up to one walks a
# neighbourhood of the thread's own position. A bare k / K is not one (the K dimension of a product).
_WINDOW_BOUND = re.compile(r"^(?:kernel|k|window|win|pool|filter)_?(?:size|sz|h|w|d|height|width|depth|len|length|"
                           r"x|y|dim)$|^(?:kernel|window|pool|filter)$", re.IGNORECASE)  # fmt: skip


def statement_after(text: str, pos: int) -> str:
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
    nested = re.match(r"(?:for|while)\s*\(", text[i:])
    if nested:  # an unbraced loop nest: for (c...) for (h...) s += x[...]; the inner loop is the body
        depth = 0
        for j in range(i + nested.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                inner = statement_after(text, j + 1)
                return text[i : text.find(inner, j + 1) + len(inner)]
    end = text.find(";", i)
    return text[i : end + 1 if end >= 0 else len(text)]


class SerialLoop(NamedTuple):
    var: str  # the loop variable
    along: str  # it and the names the body computes from it, as a regex alternative (int index = row + i)
    bound: str  # what the loop runs up to, as written (for a loop walking down: where it starts, n - 1)
    acc: str  # the scalar it folds into
    body: str
    end: int  # where the loop (its body) ends in the kernel's text
    start: int = 0  # where the loop's `for` starts in the kernel's text


def _serial_headers(kernel: str) -> Iterator[tuple[re.Match[str], str, str | None]]:
    """(match, bound, literal trip count or None) of every serial `for` header, walking up or down."""
    for m in _SERIAL_FOR.finditer(kernel):
        bound = re.search(rf";\s*{m.group(1)}\s*<=?\s*([^;]*);", m.group(0)).group(1).strip()
        yield m, bound, m.group("trip")
    for m in _SERIAL_FOR_DOWN.finditer(kernel):
        yield m, (m.group("start") or m.group("trip")).strip(), m.group("trip")


def _cuda_serial_loops(kernel: str) -> Iterator[SerialLoop]:
    """Every serial folding loop of a non-cooperating CUDA kernel, in source order."""
    if _COOPERATION.search(kernel):
        return
    for m, bound, trip in sorted(_serial_headers(kernel), key=lambda h: h[0].start()):
        var, body = m.group(1), statement_after(kernel, m.end())
        if var in _WINDOW_VARS or (trip and int(trip) < MIN_SERIAL_TRIP):
            continue
        along = _along(body, var)
        if _window_loop(bound, body, along):
            continue
        if not re.search(rf"\w+\s*\[[^\]]*\b(?:{along})\b[^\]]*\]", body):
            continue  # the loop does not read along its index
        end = kernel.find(body, m.end()) + len(body)
        for acc in _accumulators(body, var):
            yield SerialLoop(var, along, bound, acc, body, end, m.start())


def serial_depth(kernel: str) -> int:
    """How many serial folding loops are nested at the deepest point of a CUDA kernel: 1 for a walk along one
    dimension (a row, a channel column), 3 for a thread that folds a whole C/G x H x W group. The per-thread serial
    work grows with each nested dimension, so across a candidate's kernels the deepest nest is the slow one."""
    spans = {(loop.start, loop.end) for loop in _cuda_serial_loops(kernel)}
    return max((sum(1 for a, b in spans if a <= s < b) for s, _ in spans), default=0)


def _window_loop(bound: str, body: str, along: str) -> bool:
    """A loop over a window around the thread's own position, not along a row: it runs up to a window size
    (kernel_size, pool_size, ...), or a coordinate it computes is tested against 0 - a padded neighbourhood whose
    indices can fall off the edge, which a walk from a row's start never does."""
    last = re.split(r"[.>\s]", bound.strip())[-1]
    if _WINDOW_BOUND.match(last):
        return True
    derived = along.split("|")[1:]
    return any(re.search(rf"\b{n}\s*(?:>=|<)\s*0\b|\b0\s*(?:<=|>)\s*{n}\b", body) for n in derived)


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


def block_names(k: ast.FunctionDef) -> set[str]:
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
    blocks = block_names(k)
    for loop in (n for n in ast.walk(k) if isinstance(n, ast.For)):
        if _triton_window_loop(loop):
            continue
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


def _triton_window_loop(loop: ast.For) -> bool:
    """for kh in range(K) / for i in range(kernel_size): a window index or a window-sized bound (as in CUDA)."""
    if isinstance(loop.target, ast.Name) and loop.target.id in _WINDOW_VARS:
        return True
    it = loop.iter
    if isinstance(it, ast.Call) and ast.unparse(it.func) in ("range", "tl.range", "tl.static_range") and it.args:
        bound = it.args[0] if len(it.args) == 1 else it.args[1]
        return bool(_WINDOW_BOUND.match(ast.unparse(bound).split(".")[-1]))
    return False


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


# ---- the reduced axis, and work no output needs -------------------------------------------------------------------

_ASSIGN = re.compile(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^;]+);")


def _pointer_params(kernel: str) -> set[str]:
    signature = kernel[: kernel.find("{")]
    return set(re.findall(r"\*\s*(?:const\s+)?(?:__restrict__\s+)?(\w+)\s*[,)]", signature))


def _scales(expr: str, var: str, defs: dict[str, str]) -> bool:
    """`var` enters `expr` multiplied by something (i * stride), directly or through a name defined from it."""
    if re.search(rf"\b{var}\b", expr):
        return bool(re.search(rf"\b{var}\b\s*\)?\s*\*|\*\s*\(?\s*\b{var}\b", expr))
    return any(re.search(rf"\b{n}\b", expr) and _scales(value, var, {}) for n, value in defs.items())


def _cuda_strided_axis(kernel: str) -> bool:
    for loop in _cuda_serial_loops(kernel):
        if re.search(r"\bfor\s*\(", loop.body):
            continue  # an outer loop: the innermost one says how a thread walks memory
        defs = {n: value for n, value in _ASSIGN.findall(loop.body) if re.search(rf"\b{loop.var}\b", value)}
        reads = [i for i in re.findall(r"\w+\s*\[([^\]]*)\]", loop.body) if re.search(rf"\b(?:{loop.along})\b", i)]
        if reads and all(_scales(i, loop.var, defs) for i in reads):
            return True
    return False


def _derived(text: str, root: str) -> set[str]:
    """`root` and the names `text` assigns from it, directly or not (float rms = sqrtf(sum / n))."""
    names, assigns = {root}, _ASSIGN.findall(text)
    for _ in range(3):
        names |= {n for n, value in assigns if any(re.search(rf"\b{x}\b", value) for x in names)}
    return names


def _element_names(text: str, arrays: set[str]) -> set[str]:
    """Names `text` assigns from an element of one of `arrays` (float v = x[idx] - m), directly or not."""
    reads = "|".join(sorted(arrays))
    assigns = _ASSIGN.findall(text)
    names = {n for n, value in assigns if reads and re.search(rf"\b(?:{reads})\s*\[", value)}
    for _ in range(3):
        names |= {n for n, value in assigns if any(re.search(rf"\b{x}\b", value) for x in names)}
    return names


def _cuda_recomputed(kernel: str) -> bool:
    pointers = _pointer_params(kernel)
    for loop in _cuda_serial_loops(kernel):
        rest = kernel[loop.end :]
        stat = "|".join(_derived(rest, loop.acc))
        read = {a for a in re.findall(r"(\w+)\s*\[", loop.body)} & pointers
        # the output's own input element, read in the store or through names computed from it (v = expf(x[i] - m)
        # / s; out[i] = 1 / (1 + expf(-v)))
        element = "|".join([rf"\b{a}\s*\[" for a in sorted(read)] + [rf"\b{n}\b" for n in _element_names(rest, read)])
        for st in re.finditer(r"\b(\w+)\s*\[[^\]]*\]\s*=(?!=)\s*([^;]+);", rest):
            if re.search(r"\bfor\s*\(", rest[: st.start()]):
                break  # a store in a later loop walks the row: the statistic serves many outputs
            rhs = st.group(2)
            if st.group(1) in pointers and element and re.search(rf"\b(?:{stat})\b", rhs) and re.search(element, rhs):
                return True
    return False


def parenthesized(text: str, open_at: int) -> tuple[str, int]:
    """The text inside the parentheses opening at `open_at`, and the position after the closing one."""
    depth = 0
    for j in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return text[open_at + 1 : j], j + 1
    return text[open_at + 1 :], len(text)


def _cuda_discarded(kernel: str) -> bool:
    if _COOPERATION.search(kernel):
        return False  # a warp's or block's leader storing the combined result discards nothing
    pointers, positions = _pointer_params(kernel), _position_names(kernel)
    if not pointers or not positions:
        return False
    stores = [m.start() for m in re.finditer(rf"\b(?:{'|'.join(pointers)})\s*\[[^\]]*\]\s*=(?!=)", kernel)]
    guarded: list[tuple[int, int]] = []
    for m in re.finditer(r"\bif\s*\(", kernel):
        cond, after = parenthesized(kernel, m.end() - 1)
        tested = re.findall(r"\b([A-Za-z_]\w*)\s*%\s*[\w.]+\s*\)?\s*==\s*0\b", cond)
        if any(n in positions for n in tested):
            body = statement_after(kernel, after)
            start = kernel.find(body, after)
            guarded.append((start, start + len(body)))
    return bool(stores) and all(any(a <= pos < b for a, b in guarded) for pos in stores)


def _program_names(k: ast.FunctionDef) -> set[str]:
    """Names computed (directly or not) from tl.program_id: the program's position."""
    names: set[str] = set()
    for _ in range(3):
        for n in ast.walk(k):
            if isinstance(n, ast.Assign):
                reads = {x.id for x in ast.walk(n.value) if isinstance(x, ast.Name)}
                if "tl.program_id" in ast.unparse(n.value) or reads & names:
                    names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    return names


def _calls(node: ast.AST, callee: str) -> list[ast.Call]:
    return [c for c in ast.walk(node) if isinstance(c, ast.Call) and ast.unparse(c.func) == callee and c.args]


def _name_ids(node: ast.AST) -> set[str]:
    return {x.id for x in ast.walk(node) if isinstance(x, ast.Name)}


def _triton_strided_axis(k: ast.FunctionDef) -> bool:
    for loop, _ in _triton_serial_loops(k):
        if any(isinstance(n, ast.For) and n is not loop for n in ast.walk(loop)):
            continue
        var = ast.unparse(loop.target)
        along = [c.args[0] for c in _calls(loop, "tl.load") if var in _name_ids(c.args[0])]
        if along and all(_scales(ast.unparse(p), var, {}) for p in along):
            return True
    return False


def _triton_recomputed(k: ast.FunctionDef) -> bool:
    params = {a.arg for a in k.args.args}
    loops = [n for n in ast.walk(k) if isinstance(n, ast.For)]
    for loop, acc in _triton_serial_loops(k):
        read = {n for c in _calls(loop, "tl.load") for n in _name_ids(c.args[0])} & params
        stat = {acc}
        later = [n for n in ast.walk(k) if getattr(n, "lineno", 0) > (loop.end_lineno or 0)]
        for n in sorted((n for n in later if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
            if _name_ids(n.value) & stat:
                stat |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        for c in (c for c in later if isinstance(c, ast.Call) and ast.unparse(c.func) == "tl.store"):
            if len(c.args) < 2 or any(c in ast.walk(o) for o in loops):
                continue
            value = c.args[1]
            if _name_ids(value) & stat and any(_name_ids(x.args[0]) & read for x in _calls(value, "tl.load")):
                return True
    return False


def _triton_discarded(k: ast.FunctionDef) -> bool:
    positions = _program_names(k)
    stores = _calls(k, "tl.store")
    guarded = []
    for n in ast.walk(k):
        if isinstance(n, ast.If):
            mods = [b for b in ast.walk(n.test) if isinstance(b, ast.Compare) and isinstance(b.left, ast.BinOp)
                    and isinstance(b.left.op, ast.Mod) and ast.unparse(b.comparators[0]) == "0"
                    and isinstance(b.ops[0], ast.Eq) and _name_ids(b.left.left) & positions]  # fmt: skip
            if mods:
                guarded += [c for stmt in n.body for c in _calls(stmt, "tl.store")]
    return bool(stores) and all(any(c is g for g in guarded) for c in stores)


def slowest_serial_kernels(kernels: list[str]) -> list[str]:
    """The CUDA kernels with the deepest nest of serial folding loops. When a candidate has several serial kernels,
    the one whose threads fold the most nested dimensions (a GroupNorm thread walking C/G x H x W) does the most
    serial work per thread; a kernel walking one short dimension beside it (a logsumexp over 16 channels) is not
    what the forward waits on, so the layout advice follows the former."""
    depths = [serial_depth(k) for k in kernels]
    deepest = max(depths, default=0)
    return [k for k, d in zip(kernels, depths, strict=True) if d == deepest and d > 0]


def _triton_serial_depth(k: ast.FunctionDef) -> int:
    loops = list({id(loop): loop for loop, _ in _triton_serial_loops(k)}.values())
    return max((sum(1 for o in loops if any(n is loop for n in ast.walk(o))) for loop in loops), default=0)


def strided_reduction_axis(v: SourceView) -> bool:
    if v.backend == "cuda":
        return any(_cuda_strided_axis(k) for k in slowest_serial_kernels(v.cuda_kernels))
    if v.backend == "triton":
        depths = [_triton_serial_depth(k) for k in v.triton_kernels]
        deepest = max(depths, default=0)
        return any(_triton_strided_axis(k) for k, d in zip(v.triton_kernels, depths, strict=True) if d == deepest)
    return False


def recomputed_reduction(v: SourceView) -> bool:
    if v.backend == "cuda":
        return any(_cuda_recomputed(k) for k in v.cuda_kernels)
    if v.backend == "triton":
        return any(_triton_recomputed(k) for k in v.triton_kernels)
    return False


def discarded_thread_results(v: SourceView) -> bool:
    if v.backend == "cuda":
        return any(_cuda_discarded(k) for k in v.cuda_kernels)
    if v.backend == "triton":
        return any(_triton_discarded(k) for k in v.triton_kernels)
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


SERIAL_RULES = {"serial_reduction_loop": serial_reduction_loop, "serial_scan": serial_scan, "matvec_like": matvec_like,
                "strided_reduction_axis": strided_reduction_axis, "recomputed_reduction": recomputed_reduction,
                "discarded_thread_results": discarded_thread_results}  # fmt: skip
