"""Candidates: Python sources that define `class ModelNew(nn.Module)` with Model's signatures.

The backend is `triton` (`@triton.jit` kernels launched from Python) or `cuda` (CUDA C++ compiled with
`torch.utils.cpp_extension.load_inline`). It is detected from the source unless given. Kernel names are read from
the source so the reviewer can tell the candidate's own kernels from PyTorch's.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.errors import CandidateError

_GLOBAL_FN = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)")


@dataclass(frozen=True)
class Candidate:
    source: str
    path: Path | None = None
    backend: str = "triton"  # "triton", "cuda", or "none" when neither is used
    kernel_names: tuple[str, ...] = field(default_factory=tuple)
    syntax_error: str | None = None  # set when the source does not parse: a compile failure, reported by the reviewer

    @property
    def filename(self) -> str:
        return str(self.path) if self.path else "<candidate>"


def _string_constants(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _triton_kernels(tree: ast.AST) -> list[str]:
    """Names of functions decorated with triton.jit (also through autotune/heuristics)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                text = ast.unparse(dec)
                if re.search(r"\bjit\b", text):
                    names.append(node.name)
                    break
    return names


def detect_backend(tree: ast.AST) -> str:
    imports = _imports(tree)
    text_names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    if any(i.startswith("torch.utils.cpp_extension") for i in imports) or {"load_inline", "cpp_extension"} & text_names:
        return "cuda"
    if any(i == "triton" or i.startswith("triton.") for i in imports):
        return "triton"
    return "none"


MAX_DEPTH = 200  # syntax-tree levels; Python's own recursion limit is 1000, and the checks walk the tree recursively


def tree_depth(tree: ast.AST) -> int:
    """The depth of a syntax tree, found without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def parse_candidate(source: str, path: Path | None = None, backend: str | None = None) -> Candidate:
    """Parse a candidate. A syntax error is recorded (it is the candidate's compile failure, not bad input)."""
    filename = str(path) if path else "<candidate>"
    try:
        tree = ast.parse(source, filename=filename)
        depth = tree_depth(tree)
        if depth > MAX_DEPTH:
            raise SyntaxError(f"the source nests {depth} levels deep (at most {MAX_DEPTH}: every tool that reads "
                              "it walks the tree recursively)", (filename, 1, 1, "", 1, 1))
    except (RecursionError, MemoryError):
        return Candidate(source=source, path=path, backend=backend or "triton",
                         syntax_error=f"{filename}: the source nests too deeply to be parsed")
    except SyntaxError as exc:
        return Candidate(
            source=source,
            path=path,
            backend=backend or "triton",
            syntax_error=f"{filename}:{exc.lineno}:{exc.offset}: SyntaxError: {exc.msg}\n    {(exc.text or '').rstrip()}",
        )
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        raise CandidateError(
            f"{filename}: no `class ModelNew(nn.Module)` at the top level; a candidate defines ModelNew with the "
            "same constructor and forward signatures as the problem's Model"
        )
    detected = detect_backend(tree)
    kernels = _triton_kernels(tree)
    for text in _string_constants(tree):
        kernels.extend(_GLOBAL_FN.findall(text))
    return Candidate(
        source=source,
        path=path,
        backend=backend or detected,
        kernel_names=tuple(dict.fromkeys(kernels)),
    )


def read_candidate(path: str | Path, backend: str | None = None) -> Candidate:
    path = Path(path)
    if not path.is_file():
        raise CandidateError(f"{path}: no such candidate file")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CandidateError(f"{path}: cannot read the candidate file ({exc})") from None
    return parse_candidate(source, path, backend)
