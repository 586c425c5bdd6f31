"""Static checks on a candidate's Python source, run before any of it executes.

Each finding names its rule (`static:<rule>`) and line, so the verdict says which check fired. Two kinds:

- safety: code whose only purpose in a kernel candidate would be to fool the reviewer or reach outside it (patching
  torch, timing or comparison functions, walking the harness's frames, threads and processes, dynamic code). Such a
  candidate never runs, under either rule set;
- strict-only (`STRICT_ONLY`): what KernelBench's harness accepts but our agents may not do, because it hides work
  from the measurement or leans on PyTorch (try/except fallbacks, global backend switches such as cudnn.benchmark or
  TF32, reuse of the reference `Model`), or calls native code outside the build (`ctypes`, `cffi`). The candidate
  still runs; `--rules strict` rejects it afterwards by name.

Why `ctypes` is strict-only and not safety: it can call C functions and write any byte of the process, but so can the
`load_inline` extension every CUDA candidate loads into the same worker. What stands behind both is the same: the OS
confinement (no network, no files outside the sandbox, no privileges) and the runtime checks (harness functions
compared by identity, outputs checked for aliasing and laziness, results re-verified). Refusing it before it runs
stopped none of that and did stop KernelBench-correct kernels that use it to reach the CUDA runtime.
"""

from __future__ import annotations

import ast

from kernelskill.review.results import Check

FORBIDDEN_MODULES = {
    "inspect": "frame-access",
    "gc": "frame-access",
    "traceback": "frame-access",
    "threading": "concurrency",
    "_thread": "concurrency",
    "multiprocessing": "concurrency",
    "concurrent": "concurrency",
    "asyncio": "concurrency",
    "subprocess": "process",
    "signal": "process",
    "socket": "process",
    # network clients built on sockets: a kernel has no use for them (the sandbox blocks them at run time too)
    **{name: "network" for name in ("http", "urllib", "urllib3", "requests", "httpx", "aiohttp", "ftplib", "smtplib",
                                    "poplib", "imaplib", "nntplib", "telnetlib", "xmlrpc", "socketserver", "ssl",
                                    "websocket", "websockets", "paramiko")},
    "importlib": "dynamic-code",
    "builtins": "dynamic-code",
    "pickle": "dynamic-code",
    "marshal": "dynamic-code",
}
# Native calls outside the build: strict-only (see the module's docstring)
NATIVE_MODULES = {"ctypes", "cffi"}
FRAME_ATTRIBUTES = {
    "f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "tb_next", "gi_frame", "cr_frame", "ag_frame",
    "__globals__", "__builtins__", "__subclasses__", "__closure__", "_getframe", "_current_frames", "settrace",
    "setprofile", "modules",
}
DYNAMIC_CALLS = {"eval", "exec", "compile", "__import__", "breakpoint"}
PROCESS_CALLS = {
    "system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execle", "execlp", "execvp", "execvpe",
    "spawnv", "spawnl", "spawnve", "posix_spawn", "posix_spawnp", "kill", "killpg", "write", "dup", "dup2",
    "fdopen", "open", "pipe", "startfile",
}
# Module aliases whose attributes a candidate must not assign: patching them changes the harness too.
PATCHABLE_ROOTS = {"torch", "time", "triton", "tl", "F", "nn", "np", "numpy", "math", "os", "sys", "random", "functools"}


# Calls that switch a process-wide numeric setting (TF32, default dtype, denormals) for the reference as well.
GLOBAL_SETTING_CALLS = {"set_float32_matmul_precision", "set_default_dtype", "set_flush_denormal",
                        "use_deterministic_algorithms"}
STRICT_ONLY = frozenset({"static:try-fallback", "static:backend-flags", "static:reference-model",
                         "static:native-calls"})


def _is_literal(value: ast.AST | None) -> bool:
    """A plain value (number, string, bool, None, or a tuple/list of them), never code."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Constant):
        return True
    if isinstance(value, (ast.Tuple, ast.List)):
        return all(_is_literal(v) for v in value.elts)
    return False


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> module it stands for (from `import x as y` / `from x import y`)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


class _Checker(ast.NodeVisitor):
    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self.checks: list[Check] = []
        self.roots = {name for name, module in aliases.items() if module.split(".")[0] in {"torch", "triton", "time", "numpy", "math", "os", "sys", "random", "functools"}} | PATCHABLE_ROOTS

    def add(self, rule: str, node: ast.AST, detail: str) -> None:
        self.checks.append(Check(name=f"static:{rule}", detail=f"line {getattr(node, 'lineno', '?')}: {detail}"))

    # imports -----------------------------------------------------------------------------------------------
    def _check_module(self, name: str, node: ast.AST) -> None:
        top = name.split(".")[0]
        if top in FORBIDDEN_MODULES:
            self.add(FORBIDDEN_MODULES[top], node, f"imports `{name}`, which a kernel candidate has no use for")
        elif top in NATIVE_MODULES:
            self.add("native-calls", node, f"imports `{name}`: calls native code outside the build; put it in the "
                                           "kernel's C++/CUDA source instead")

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_module(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module:
            self._check_module(node.module, node)
            if node.module == "sys" and any(a.name in FRAME_ATTRIBUTES for a in node.names):
                self.add("frame-access", node, "imports frame or module internals from sys")
            if node.module == "os" and any(a.name in PROCESS_CALLS for a in node.names):
                self.add("process", node, "imports process or file-descriptor functions from os")

    # attribute access and calls ----------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in FRAME_ATTRIBUTES:
            root = _root_name(node)
            # `modules` is only suspicious on sys (sys.modules); every other name is suspicious anywhere
            if node.attr != "modules" or self.aliases.get(root or "") == "sys":
                self.add("frame-access", node, f"accesses `.{node.attr}` (interpreter frames or module internals)")
        if node.attr in PROCESS_CALLS and self.aliases.get(_root_name(node) or "") == "os":
            self.add("process", node, f"uses os.{node.attr}")
        if node.attr == "Model":
            self.add("reference-model", node, "refers to a `Model` attribute (the reference); compute the result yourself")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "Model" and isinstance(node.ctx, ast.Load):
            self.add("reference-model", node, "uses the reference `Model`; ModelNew must compute the result itself")
        if node.id in ("__builtins__",):
            self.add("frame-access", node, "uses __builtins__")

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name):
            if node.func.id in DYNAMIC_CALLS:
                self.add("dynamic-code", node, f"calls `{node.func.id}()`")
            if node.func.id in ("setattr", "delattr") and node.args:
                if _root_name(node.args[0]) in self.roots:
                    target = ast.unparse(node.args[0])
                    if "backends" in target:
                        self.add("backend-flags", node, f"{node.func.id}() on `{target}`: a global PyTorch setting")
                    else:
                        self.add("monkey-patch", node, f"{node.func.id}() on `{target}`")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in GLOBAL_SETTING_CALLS:
            if self.aliases.get(_root_name(node.func) or "", "").split(".")[0] == "torch":
                self.add("backend-flags", node, f"calls `{ast.unparse(node.func)}()`: a global PyTorch setting, which "
                                                "also changes how the reference runs")
        self.generic_visit(node)

    # assignments -------------------------------------------------------------------------------------------
    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt, node)
        elif isinstance(target, ast.Attribute) and _root_name(target) in self.roots:
            text = ast.unparse(target)
            if ".backends." in text or text.startswith("torch.backends"):
                self.add("backend-flags", node, f"assigns `{text}`: a global PyTorch setting, which also changes how "
                                                "the reference runs")
            elif ".config." in text and _is_literal(getattr(node, "value", None)):
                # torch._inductor.config.x = True and the like: a compiler option set to a plain value, which
                # KernelBench accepts; a callable assigned there would be a patch
                self.add("backend-flags", node, f"assigns `{text}`: a global compiler option, which also changes how "
                                                "the reference (and its torch.compile baseline) runs")
            else:
                self.add("monkey-patch", node, f"assigns `{text}`: replaces a library function or attribute "
                                               "(monkey-patching)")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    # control flow and classes ------------------------------------------------------------------------------
    def _visit_try(self, node: ast.AST) -> None:
        only_imports = all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in node.body)
        if not only_imports:
            self.add(
                "try-fallback",
                node,
                "try/except around computation (it can hide failures or fall back to the reference); let errors surface",
            )
        self.generic_visit(node)

    visit_Try = _visit_try
    if hasattr(ast, "TryStar"):
        visit_TryStar = _visit_try

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "ModelNew":
            for base in node.bases:
                text = ast.unparse(base)
                if text.split(".")[-1] != "Module":
                    self.add("reference-model", node, f"ModelNew derives from `{text}`; it must derive from nn.Module")
        self.generic_visit(node)


def split_findings(found: list[Check]) -> tuple[list[Check], list[Check]]:
    """(safety findings, strict-only findings)."""
    return [c for c in found if c.name not in STRICT_ONLY], [c for c in found if c.name in STRICT_ONLY]


def static_checks(source: str, filename: str = "<candidate>") -> list[Check]:
    """Every static finding in `source` (empty when it is clean). The source must parse."""
    tree = ast.parse(source, filename=filename)
    checker = _Checker(_module_aliases(tree))
    checker.visit(tree)
    return checker.checks
