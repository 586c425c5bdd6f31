"""KernelBench problems: a Python file with `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`.

`read_problem` checks the file's shape without running it (cheap, safe to do in the parent process).
`instantiate_problem` executes it and validates what `get_inputs` / `get_init_inputs` return, and `build_and_draw`
builds Model and draws one set of inputs: they run only in confined child processes (the review worker, and the
problem probe, review/probe.py, whose `check_problem` runs a problem once before `optimize` or `bench` asks a model
anything), never in the harness, which holds the API keys. All raise `ProblemError` with a message that names the
file and says what is wrong.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from kernelskill.errors import ProblemError

REQUIRED = ("Model", "get_inputs", "get_init_inputs")


@dataclass(frozen=True)
class Problem:
    path: Path
    source: str
    name: str  # file stem, e.g. "19_ReLU"

    @property
    def display(self) -> str:
        return str(self.path)


def _defined_names(tree: ast.Module) -> dict[str, str]:
    """Top-level names a module defines, with what defines them ("class", "def", "assign", "import")."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = "def"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names[target.id] = "assign"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = "import"
    return names


def read_problem(path: str | Path) -> Problem:
    """Read a problem file and check, without running it, that it has the KernelBench shape."""
    path = Path(path)
    if not path.is_file():
        raise ProblemError(f"{path}: no such problem file")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path}: cannot read the problem file ({exc})") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(f"{path}:{exc.lineno}: syntax error in the problem file: {exc.msg}") from None
    names = _defined_names(tree)
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        raise ProblemError(
            f"{path}: not a KernelBench problem: it does not define {', '.join(missing)}. A problem defines "
            "`class Model(nn.Module)`, `get_inputs()` (returns the forward inputs) and `get_init_inputs()` "
            "(returns the constructor arguments)."
        )
    if names["Model"] != "class":
        raise ProblemError(f"{path}: `Model` must be a class (an nn.Module subclass)")
    return Problem(path=path, source=source, name=path.stem)


@dataclass
class LoadedProblem:
    module: types.ModuleType
    model_cls: type
    get_inputs: object
    get_init_inputs: object


def load_module(source: str, filename: str, module_name: str) -> types.ModuleType:
    """Execute `source` as a fresh module (registered in sys.modules so dataclasses and pickling work)."""
    spec = importlib.util.spec_from_loader(module_name, loader=None, origin=filename)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = filename
    sys.modules[module_name] = module
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)
    return module


def _where(exc: BaseException, filename: str) -> str:
    """The innermost line of `filename` in a traceback, as 'file:line', for short error messages."""
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f"{filename}:{line}" if line else filename


def instantiate_problem(problem: Problem, module_name: str = "kernelskill_problem") -> LoadedProblem:
    """Execute the problem file and check its three entry points. Runs in the review worker and in the problem
    probe (review/probe.py), never in the harness."""
    import torch.nn as nn

    filename = str(problem.path)
    try:
        module = load_module(problem.source, filename, module_name)
    except Exception as exc:  # the user's file failed at import time: say where and why, no deep traceback
        raise ProblemError(f"{_where(exc, filename)}: the problem file raised on import: {type(exc).__name__}: {exc}") from None
    model_cls = getattr(module, "Model", None)
    if not (isinstance(model_cls, type) and issubclass(model_cls, nn.Module)):
        raise ProblemError(f"{filename}: `Model` must be a subclass of torch.nn.Module")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, fn, None)):
            raise ProblemError(f"{filename}: `{fn}` must be a function")
    return LoadedProblem(module, model_cls, module.get_inputs, module.get_init_inputs)


def call_entry(problem: Problem, fn, name: str) -> list:
    """Call get_inputs / get_init_inputs and check that it returns a list or tuple (of tensors and plain values)."""
    import torch

    filename = str(problem.path)
    try:
        value = fn()
    except Exception as exc:
        raise ProblemError(f"{_where(exc, filename)}: `{name}()` raised {type(exc).__name__}: {exc}") from None
    if not isinstance(value, (list, tuple)):
        raise ProblemError(
            f"{filename}: `{name}()` must return a list of values (tensors for get_inputs), got {type(value).__name__}"
        )
    allowed = (torch.Tensor, int, float, bool, str, type(None), tuple, list)
    for i, item in enumerate(value):
        if not isinstance(item, allowed):
            raise ProblemError(f"{filename}: `{name}()` item {i} is a {type(item).__name__}; expected a tensor or a number")
    if name == "get_inputs" and not any(isinstance(v, torch.Tensor) for v in value):
        raise ProblemError(f"{filename}: `get_inputs()` returned no tensor; it must return the forward inputs")
    return list(value)


_CHECKS = itertools.count()


def build_and_draw(problem: Problem) -> None:
    """Load the problem, build Model and draw one set of inputs, as the review worker will: a problem whose
    `get_inputs()` raises would otherwise cost every seed's LLM call before its first review said so. Problem code
    runs here: call it only in a confined child (review/probe.py's `check_problem` does).

    It runs on PyTorch's meta device first (shapes without memory: a KernelBench input of several GB costs
    nothing), and only when that fails, again on the CPU, whose error is the one reported: some problems need real
    values (`.item()`, numpy), which the meta device cannot give."""
    import torch

    try:
        _build_and_draw(problem, torch.device("meta"))
    except Exception:  # noqa: BLE001 - meta may be what failed; the CPU run below decides
        _build_and_draw(problem, torch.device("cpu"))


def _build_and_draw(problem: Problem, device) -> None:
    name = f"kernelskill_problem_check_{next(_CHECKS)}"  # its own module, apart from the work count's
    try:
        loaded = instantiate_problem(problem, name)
        with device:
            init = call_entry(problem, loaded.get_init_inputs, "get_init_inputs")
            try:
                loaded.model_cls(*init)
            except Exception as exc:
                raise ProblemError(f"{_where(exc, str(problem.path))}: `Model(*get_init_inputs())` raised "
                                   f"{type(exc).__name__}: {exc}") from None
            call_entry(problem, loaded.get_inputs, "get_inputs")
    finally:
        sys.modules.pop(name, None)
