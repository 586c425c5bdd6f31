"""A candidate's source split into the parts the rule-based feature extractors look at.

A candidate is a Python file. CUDA kernels live in string literals passed to `load_inline`; Triton kernels are
`@triton.jit` functions; the host side is `ModelNew.forward` plus the module-level helpers it calls. Comments are
removed first so that a commented-out `__shared__` or `tl.dot` does not count.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.errors import CandidateError

CUDA_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")
_C_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_CPP_DECL = re.compile(r"(?:torch::Tensor|at::Tensor|std::vector<torch::Tensor>|void)\s+(\w+)\s*\(")
# torch functions that do not launch a kernel (allocation without fill, views, metadata).
_NO_KERNEL = {"empty", "empty_like", "empty_strided", "Size", "device", "is_tensor", "numel", "broadcast_shapes",
              "manual_seed", "no_grad", "inference_mode", "get_default_dtype", "finfo", "iinfo"}  # fmt: skip
_TENSOR_METHODS = {"sum", "mean", "max", "min", "exp", "log", "relu", "sigmoid", "tanh", "softmax", "matmul",
                   "mm", "bmm", "add", "sub", "mul", "div", "pow", "sqrt", "clamp", "contiguous", "clone",
                   "transpose", "permute", "abs", "neg", "norm", "var", "std", "cumsum", "argmax", "argmin",
                   "masked_fill", "fill_", "zero_", "copy_", "add_", "mul_", "t"}  # fmt: skip


@dataclass
class SourceView:
    filename: str
    text: str  # the whole file, comments removed
    backend: str  # "cuda" | "triton" | "torch"
    cuda: str = ""  # all CUDA C++ source found, comments removed
    cuda_kernels: list[str] = field(default_factory=list)  # each __global__ function, signature and body
    cuda_device_functions: list[str] = field(default_factory=list)  # each __device__ helper, signature and body
    cuda_host: str = ""  # the C++ outside the kernels and device helpers: launchers, their PyTorch calls
    triton_kernels: list[ast.FunctionDef] = field(default_factory=list)
    triton_sources: list[str] = field(default_factory=list)
    host: str = ""  # forward plus the module-level functions it calls
    launch_sites: int = 0
    launch_in_loop: bool = False
    # the host reduces what a kernel of the candidate wrote with a PyTorch reduction (forward: torch.mean(y) after
    # y = ext.kernel(x); a C++ launcher: return out.sum() after out's kernel): a separate pass over the output
    host_reduces_kernel_output: bool = False
    # the forward calls a library product (torch.matmul, an nn.Linear / nn.Conv submodule...) inside a loop
    library_calls_in_loop: bool = False
    # a library product runs in the forward before one of the candidate's own kernels
    library_product_before_kernel: bool = False
    # launch sites in the forward after its first library product (the small kernels left around cuBLAS/cuDNN)
    launches_after_library_product: int = 0

    @property
    def kernels(self) -> list[str]:
        return self.cuda_kernels if self.backend == "cuda" else self.triton_sources


def read_source(path: str | Path) -> SourceView:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CandidateError(f"{p}: cannot read the candidate source: {exc}") from None
    return build_view(text, str(p))


def build_view(text: str, filename: str = "<candidate>") -> SourceView:
    if filename.endswith(CUDA_SUFFIXES):  # a bare CUDA file: everything is kernel source, no Python host
        cuda = _C_COMMENTS.sub("", text)
        view = SourceView(filename, cuda, "cuda", cuda=cuda, cuda_kernels=_cuda_kernels(cuda))
        _split_device_code(view)
        return view
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as exc:
        raise CandidateError(f"{filename}: line {exc.lineno}: syntax error: {exc.msg}") from None
    clean = _strip_python_comments(text)
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    cuda = "\n".join(_C_COMMENTS.sub("", s) for s in strings if "__global__" in s or "#include" in s or "<<<" in s)
    triton = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_triton_jit(n)]
    view = SourceView(filename, clean, "torch", cuda=cuda, cuda_kernels=_cuda_kernels(cuda), triton_kernels=triton)
    view.triton_sources = [ast.get_source_segment(clean, n) or "" for n in triton]
    view.backend = "cuda" if view.cuda_kernels else "triton" if triton else "torch"
    _split_device_code(view)
    _analyse_host(view, tree, clean, strings)
    return view


def _strip_python_comments(text: str) -> str:
    lines = text.splitlines(keepends=True)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                line = lines[row - 1]
                # keep the line count and columns, so ast positions still match
                lines[row - 1] = line[:col] + " " * (len(line.rstrip("\r\n")) - col) + line[len(line.rstrip("\r\n")) :]
    except (tokenize.TokenError, IndentationError):
        return text  # ast.parse accepted it; comments then stay, which only risks a false positive
    return "".join(lines)


def _cuda_kernels(cuda: str) -> list[str]:
    return [cuda[a:b] for a, b in _function_spans(cuda, "__global__")]


def _function_spans(cuda: str, qualifier: str) -> list[tuple[int, int]]:
    """(start, end) of each function definition marked `qualifier`, from the qualifier to its closing brace; a
    declaration or a variable (`__device__ float g;`: a ';' before any '{') is skipped."""
    spans = []
    for m in re.finditer(rf"\b{qualifier}\b", cuda):
        brace, semi = cuda.find("{", m.end()), cuda.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue
        depth, i = 0, brace
        while i < len(cuda):
            depth += {"{": 1, "}": -1}.get(cuda[i], 0)
            if depth == 0:
                break
            i += 1
        spans.append((m.start(), i + 1))
    return spans


def _split_device_code(view: SourceView) -> None:
    """The __device__ helpers the kernels call, and the host C++ left when kernels and helpers are cut out."""
    spans = _function_spans(view.cuda, "__global__")
    device = [(a, b) for a, b in _function_spans(view.cuda, "__device__") if not any(x <= a < y for x, y in spans)]
    view.cuda_device_functions = [view.cuda[a:b] for a, b in device]
    host, last = [], 0
    for a, b in sorted(spans + device):
        if a >= last:
            host.append(view.cuda[last:a])
            last = b
    view.cuda_host = "".join(host) + view.cuda[last:]


def _is_triton_jit(node: ast.FunctionDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = ast.unparse(target)
        if name in ("triton.jit", "jit", "tl.jit") or name.endswith(".jit"):
            return True
    return False


def _analyse_host(view: SourceView, tree: ast.Module, clean: str, strings: list[str]) -> None:
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and not _is_triton_jit(n)}
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    cls = next((c for c in classes if c.name == "ModelNew"), None) or next(
        (c for c in classes if any(isinstance(b, ast.FunctionDef) and b.name == "forward" for b in c.body)), None
    )
    if cls is None:
        return
    forward = next((b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == "forward"), None)
    if forward is None:
        return
    # the forward, the forwards of the file's own modules it holds as submodules (self.bn = CustomBatchNorm(...)),
    # and the helpers they call (two levels deep covers wrapper -> launcher)
    host_nodes: list[ast.FunctionDef] = [forward] + _own_submodule_forwards(cls, classes)
    for _ in range(2):
        called = {c.func.id for n in host_nodes for c in ast.walk(n) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Name)}  # fmt: skip
        host_nodes += [funcs[name] for name in sorted(called) if name in funcs and funcs[name] not in host_nodes]
    view.host = "\n".join(ast.get_source_segment(clean, n) or "" for n in host_nodes)
    ext_functions = set(_CPP_DECL.findall("\n".join(strings))) | _load_inline_functions(tree)
    submodules = _nn_submodules(cls)
    kernels = {k.name for k in view.triton_kernels}
    # helpers the forward calls inside a loop: their launches repeat too (for op in ...: x = launch_helper(x))
    in_loop = {c.func.id for loop in ast.walk(forward) if isinstance(loop, ast.For | ast.While)
               for c in ast.walk(loop) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}  # fmt: skip
    _library_products(view, forward, _nn_product_submodules(cls), ext_functions, submodules, kernels)
    called_ext: set[str] = set()
    for node in host_nodes:
        first_own_launch = None
        calls = sorted((c for c in ast.walk(node) if isinstance(c, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
        for call in calls:
            if _launches(call, ext_functions, submodules, kernels):
                view.launch_sites += 1
                repeated = _inside_loop(call, node) or (node is not forward and node.name in in_loop)
                view.launch_in_loop = view.launch_in_loop or repeated
            own = _own_launch(call, ext_functions, kernels)
            if own:
                called_ext.add(own)
                first_own_launch = first_own_launch or call.lineno
            elif first_own_launch is not None and call.lineno > first_own_launch and _is_torch_reduction(call):
                view.host_reduces_kernel_output = True
    for name in sorted(called_ext):
        body = _cpp_function_body(view.cuda_host, name)
        launches = len(re.findall(r"<<<", body))
        after = body[body.find("<<<") :] if launches else ""
        ops = [m.group(1) or m.group(2) for m in _CPP_TORCH_CALL.finditer(after)]
        ops = [op for op in ops if op not in _NO_KERNEL and not op.startswith(_CPP_NO_KERNEL)]
        # each further kernel the launcher starts, and each PyTorch op it applies once its kernel ran, is a launch
        view.launch_sites += max(0, launches - 1) + len(ops)
        view.host_reduces_kernel_output |= any(op in _REDUCTIONS for op in ops)


_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "var", "std", "logsumexp", "nansum",
               "nanmean", "count_nonzero", "all", "any"}  # fmt: skip
# PyTorch calls in C++ launchers: tensor methods (out.sum(), y.mul_(m)) and torch:: / at:: functions
_CPP_TORCH_CALL = re.compile(r"\.\s*(\w+)\s*\(|\b(?:torch|at)::(\w+)\s*\(")
# C++ names that launch nothing or only allocate: accessors, options, allocations (zeros_like fills, but before the
# kernel, not on its result), dispatch helpers
_CPP_NO_KERNEL = ("data_ptr", "size", "sizes", "stride", "strides", "numel", "dim", "options", "device", "dtype",
                  "scalar_type", "is_", "defined", "item", "accessor", "packed_accessor", "empty", "zeros", "ones",
                  "full", "TensorOptions", "kFloat", "view", "reshape", "squeeze", "unsqueeze", "expand", "narrow",
                  "select", "slice", "to", "type", "index", "get", "push_back", "begin", "end", "str",
                  "c_str")  # fmt: skip


_TORCH_PRODUCTS = {"matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "conv1d", "conv2d", "conv3d",
                   "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}  # fmt: skip


def _is_library_product(node: ast.AST, products: set[str]) -> bool:
    """torch.matmul(...), F.linear(...), a @ b, x.mm(w), or a call of an nn.Linear / nn.Conv* submodule."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return True
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    base, attr = ast.unparse(node.func.value), node.func.attr
    if base == "self":
        return attr in products
    if base in ("torch", "F", "torch.nn.functional"):
        return attr in _TORCH_PRODUCTS
    return attr in ("matmul", "mm", "bmm")


def _library_products(view: SourceView, forward: ast.FunctionDef, products: set[str], ext_functions: set[str],
                      submodules: set[str], kernels: set[str]) -> None:  # fmt: skip
    """Where the forward's library products sit: inside a loop, before an own kernel, and the launch sites after."""
    nodes = sorted((n for n in ast.walk(forward) if isinstance(n, ast.Call | ast.BinOp) and hasattr(n, "lineno")),
                   key=lambda n: (n.lineno, n.col_offset))  # fmt: skip
    seen = False
    for node in nodes:
        if _is_library_product(node, products):
            view.library_calls_in_loop |= _inside_loop(node, forward)
            if seen:
                view.launches_after_library_product += 1
            seen = True
        elif seen and isinstance(node, ast.Call):
            if _own_launch(node, ext_functions, kernels):
                view.library_product_before_kernel = True
            if _launches(node, ext_functions, submodules, kernels):
                view.launches_after_library_product += 1


def _nn_product_submodules(cls: ast.ClassDef) -> set[str]:
    """Attributes holding an nn.Linear, nn.Bilinear or convolution module (their forward is a cuBLAS/cuDNN call)."""
    subs: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = ast.unparse(node.value.func).split(".")[-1]
            if callee in ("Linear", "Bilinear", "LazyLinear") or callee.startswith(("Conv", "LazyConv")):
                subs |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)}
    return subs


def _own_launch(call: ast.Call, ext_functions: set[str], triton_kernels: set[str]) -> str | None:
    """The name of the candidate's own kernel or exported C++ function this call starts, if it starts one."""
    func = call.func
    if isinstance(func, ast.Subscript):
        target = func.value
        name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
        return name if name in triton_kernels else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name if name in ext_functions else None


def _is_torch_reduction(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _REDUCTIONS:
        return False
    return ast.unparse(func.value) not in ("math", "np", "numpy", "builtins", "tl")  # torch.mean(y), y.sum()


def _cpp_function_body(cpp: str, name: str) -> str:
    m = re.search(rf"\b{re.escape(name)}\s*\([^;{{]*\)\s*\{{", cpp)
    if m is None:
        return ""
    depth, i = 0, m.end() - 1
    for j in range(i, len(cpp)):
        depth += {"{": 1, "}": -1}.get(cpp[j], 0)
        if depth == 0:
            return cpp[i : j + 1]
    return cpp[i:]


def _own_submodule_forwards(cls: ast.ClassDef, classes: list[ast.ClassDef]) -> list[ast.FunctionDef]:
    """forward of each class of the file that `cls` holds as a submodule (self.bn = CustomBatchNorm2d(...))."""
    own = {c.name: c for c in classes if c is not cls}
    found = []
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = ast.unparse(node.value.func)
            sub = own.get(callee)
            body = sub.body if sub else []
            fwd = next((b for b in body if isinstance(b, ast.FunctionDef) and b.name == "forward"), None)
            if fwd is not None and fwd not in found:
                found.append(fwd)
    return found


def _load_inline_functions(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and ast.unparse(call.func).endswith("load_inline"):
            for kw in call.keywords:
                if kw.arg == "functions" and isinstance(kw.value, ast.List | ast.Tuple):
                    names |= {e.value for e in kw.value.elts
                              if isinstance(e, ast.Constant) and isinstance(e.value, str)}  # fmt: skip
    return names


def _nn_submodules(cls: ast.ClassDef) -> set[str]:
    subs: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = ast.unparse(node.value.func)
            if callee.startswith(("nn.", "torch.nn.")) and callee.split(".")[-1][:1].isupper():
                subs |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)}
    return subs


def _launches(call: ast.Call, ext_functions: set[str], submodules: set[str], triton_kernels: set[str]) -> bool:
    """A call in the host code that launches at least one GPU kernel."""
    func = call.func
    if isinstance(func, ast.Subscript):  # kernel[grid](...)
        target = func.value
        name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
        return name in triton_kernels
    dotted = ast.unparse(func)
    if isinstance(func, ast.Attribute):
        base = ast.unparse(func.value)
        if func.attr in ext_functions:
            return True
        if base in ("torch", "F", "torch.nn.functional", "torch.special", "torch.linalg"):
            return func.attr not in _NO_KERNEL
        if base == "self" and func.attr in submodules:
            return True
        return func.attr in _TENSOR_METHODS and base not in ("torch", "triton", "tl", "math", "np")
    return dotted in ext_functions


def _inside_loop(target: ast.AST, root: ast.AST) -> bool:
    for loop in ast.walk(root):
        if isinstance(loop, ast.For | ast.While) and any(n is target for n in ast.walk(loop)):
            return True
    return False
