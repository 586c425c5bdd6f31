"""The one stand-in for `torch.utils.cpp_extension.load_inline`, used by every review worker, in one of three modes:

    run    a review on the GPU: build with `build.build_inline` (or find in the cache), import, return the module;
           what this builder fails on outside the candidate's own lines is built by torch's own function
    check  a review on the CPU, where CUDA cannot run and torch's CUDA libraries may be missing: compile the same
           units with the same flags, stop before the link, and report the compiler's real errors
    build  a prebuild on CPU cores before the review waits for a GPU: build into the shared cache for the GPU's arch
           (a pending SIGALRM is paused meanwhile: a build is not the caller's time limit)

In "check" and "build" the module returned refuses to run (`NotRunnable`). Every call is recorded in `BUILDS`, in
call order; the worker reports compile seconds, cache hits and warnings from there.

A call is read as torch reads it (`bind`): positional or keyword arguments in torch's own order (which gained
`sycl_sources` in 2.7), sources as a string or a list, `functions` as a name, a list or a dict, and flags the way
torch's ninja file uses them (`plan.split_flags`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Literal

from kernelskill.review.cuda import CudaCompileError, cache
from kernelskill.review.cuda.build import BuiltExtension, build_inline
from kernelskill.review.cuda.cache import file_sha, flock
from kernelskill.review.cuda.plan import split_flags
from kernelskill.review.cuda.toolchain import digest
from kernelskill.review.logs import compiler_errors, trim_log

Mode = Literal["run", "check", "build"]
MODES = ("run", "check", "build")
CHECK_ARCH = "9.0"
"""The GPU arch CUDA sources are checked for when TORCH_CUDA_ARCH_LIST does not name one (Hopper, as on the H200)."""


def _capture():
    import torch.utils.cpp_extension as cpp_extension

    fn = cpp_extension.load_inline
    # Captured when this module is imported, before it can install itself: still torch's own function.
    assert fn.__module__ == "torch.utils.cpp_extension", f"load_inline was replaced before {__name__} was imported"
    return fn


_TORCH_LOAD_INLINE = _capture()


def _torch_load_inline():
    """torch's own function, also after a stand-in was installed in its place (what `torch_fallback` calls)."""
    return _TORCH_LOAD_INLINE


# ------------------------------------------------------------------------------------------------ reading the call
def torch_signature() -> inspect.Signature:
    return inspect.signature(_TORCH_LOAD_INLINE)


def _sources(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return "\n".join(str(v) for v in value)


@dataclass
class InlineArgs:
    """One `load_inline` call, normalized. `torch_call` is the call bound to torch's own signature, for the
    fallback to torch's function."""

    name: str
    cpp_sources: str
    cuda_sources: str
    functions: object
    extra_cflags: list[str]
    extra_cuda_cflags: list[str]
    extra_ldflags: list[str]
    extra_include_paths: list[str]
    with_cuda: bool | None
    is_python_module: bool
    with_pytorch_error_handling: bool
    no_implicit_headers: bool
    verbose: bool
    build_directory: str | None
    ignored: dict = field(default_factory=dict)  # accepted, no effect on the cached build (use_pch, ...)
    torch_call: inspect.BoundArguments | None = None

    def build_kwargs(self) -> dict:
        """The keyword arguments of `build.build_inline`."""
        return dict(name=self.name, cpp_sources=self.cpp_sources, cuda_sources=self.cuda_sources or None,
                    functions=self.functions, extra_cflags=self.extra_cflags,
                    extra_cuda_cflags=self.extra_cuda_cflags, extra_ldflags=self.extra_ldflags,
                    extra_include_paths=self.extra_include_paths, with_cuda=self.with_cuda,
                    with_pytorch_error_handling=self.with_pytorch_error_handling,
                    no_implicit_headers=self.no_implicit_headers, verbose=self.verbose)


def bind(*args, **kwargs) -> InlineArgs:
    """Read a `load_inline(...)` call as torch would. A call torch refuses (an unknown keyword, a missing name)
    raises the same TypeError."""
    bound = torch_signature().bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    if _sources(a.get("sycl_sources")).strip():
        raise ValueError("SYCL sources are not supported by kernelskill's builder")
    known = {"name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags", "extra_cuda_cflags",
             "extra_sycl_cflags", "extra_ldflags", "extra_include_paths", "build_directory", "verbose", "with_cuda",
             "with_sycl", "is_python_module", "with_pytorch_error_handling", "no_implicit_headers"}
    functions = a.get("functions")
    if functions is not None and not isinstance(functions, (str, list, tuple, dict)):
        raise ValueError(f"Expected 'functions' to be a list or dict, but was {type(functions)}")
    return InlineArgs(
        name=str(a["name"]),
        cpp_sources=_sources(a.get("cpp_sources")),
        cuda_sources=_sources(a.get("cuda_sources")),
        functions=functions,
        extra_cflags=split_flags(a.get("extra_cflags")),
        extra_cuda_cflags=split_flags(a.get("extra_cuda_cflags")),
        extra_ldflags=split_flags(a.get("extra_ldflags")),
        # torch makes each one absolute after stripping it: '' is the working directory, as there
        extra_include_paths=[os.path.abspath(str(p).strip()) for p in (a.get("extra_include_paths") or [])],
        with_cuda=a.get("with_cuda"),
        is_python_module=bool(a.get("is_python_module", True)),
        with_pytorch_error_handling=bool(a.get("with_pytorch_error_handling", True)),
        no_implicit_headers=bool(a.get("no_implicit_headers", False)),
        verbose=bool(a.get("verbose", False)),
        build_directory=a.get("build_directory"),
        ignored={k: v for k, v in a.items() if k not in known},
        torch_call=bound,
    )


# ------------------------------------------------------------------------------------------------------ the stand-in
BUILDS: list[BuiltExtension] = []
"""What the stand-in built, found or (prebuild) gave up on in this process, in call order."""


class NotRunnable:
    """What "check" and "build" return: any function of the extension refuses to run."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        def refuse(*args, **kwargs):
            raise RuntimeError(f"extension {self._name!r} was compile-checked only: CUDA code does not run on CPU")

        return refuse


def check_arch() -> str:
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    return listed if listed and listed != "native" else CHECK_ARCH


def stand_in(mode: Mode = "run", arch: str | None = None):
    """A function that takes exactly load_inline's arguments and builds in `mode` (see the module's docstring).
    `arch` is the target ("9.0", "sm_90a"); None: the visible GPU's in "run", TORCH_CUDA_ARCH_LIST or CHECK_ARCH in
    "check"."""
    if mode not in MODES:
        raise ValueError(f"unknown load_inline mode {mode!r}: one of {', '.join(MODES)}")

    def load_inline(*args, **kwargs):
        return _load(mode, arch, bind(*args, **kwargs))

    load_inline.__doc__ = f"torch.utils.cpp_extension.load_inline, as kernelskill builds it ({mode!r} mode)."
    load_inline.mode = mode
    return load_inline


load_inline = stand_in("run")
"""Stands in for torch.utils.cpp_extension.load_inline on a GPU: the same arguments, the same module.

`build_directory`, `keep_intermediates` and `use_pch` are accepted and ignored: builds live in the cache (sources and
logs are kept there) and always use this package's precompiled header."""


def install(mode: Mode = "run", arch: str | None = None) -> None:
    """Make `torch.utils.cpp_extension.load_inline` (and names imported from it afterwards) the stand-in; in "run"
    mode `load` too (load_files.py: torch's own, in a folder named by its sources)."""
    import torch.utils.cpp_extension as cpp_extension

    from kernelskill.review.cuda import load_files

    cpp_extension.load_inline = stand_in(mode, arch)
    if mode != "check":
        cpp_extension.load = load_files.stand_in(mode, arch)


@contextlib.contextmanager
def installed(mode: Mode, arch: str | None = None):
    """The stand-in in `mode` for the block; what was installed before comes back after it."""
    import torch.utils.cpp_extension as cpp_extension

    from kernelskill.review.cuda import load_files

    saved = cpp_extension.load_inline, cpp_extension.load
    cpp_extension.load_inline = stand_in(mode, arch)
    if mode != "check":
        cpp_extension.load = load_files.stand_in(mode, arch)
    try:
        yield
    finally:
        cpp_extension.load_inline, cpp_extension.load = saved


def _load(mode: Mode, arch: str | None, call: InlineArgs):
    if mode == "run":
        return _build_and_import(call, arch)
    if mode == "check":
        built = build_inline(**call.build_kwargs(), arch=arch or check_arch(), link=False)
    else:
        start = time.perf_counter()
        with alarm_paused():
            try:
                built = build_inline(**call.build_kwargs(), arch=arch)
            except CudaCompileError as exc:
                if exc.in_own_code:
                    raise
                # maybe this builder's failure: the review on the GPU tries torch's own load_inline
                built = BuiltExtension(call.name, call.name, "", None, False, round(time.perf_counter() - start, 3),
                                       failed=str(exc)[:2000])
    BUILDS.append(built)
    return NotRunnable(call.name)


@contextlib.contextmanager
def alarm_paused():
    """A pending SIGALRM (the prebuild's limit on calling ModelNew) stopped while a build runs, then set again."""
    remaining = signal.alarm(0)
    try:
        yield
    finally:
        if remaining:
            signal.alarm(remaining)


# ----------------------------------------------------------------------------------------------------- "run" mode
_IMPORTED: dict[str, object] = {}


def _import(built: BuiltExtension, is_python_module: bool):
    path = str(built.so_path)
    if path in _IMPORTED:
        return _IMPORTED[path]
    if not is_python_module:
        import torch

        torch.ops.load_library(path)
        _IMPORTED[path] = path
        return path
    spec = importlib.util.spec_from_file_location(built.module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _IMPORTED[path] = module
    return module


def _discard(built: BuiltExtension) -> None:
    """Remove a cached build that does not import, unless another process has replaced it meanwhile."""
    entry = built.so_path.parent
    with flock(cache.extension_lock(built.key)):
        with contextlib.suppress(OSError, ValueError, KeyError):
            info = json.loads((entry / "build.json").read_text())
            if info["so_sha256"] == file_sha(built.so_path):
                shutil.rmtree(entry, ignore_errors=True)


def _demangle(text: str) -> str:
    symbols = re.findall(r"undefined symbol: (\S+)", text)
    if not symbols or shutil.which("c++filt") is None:
        return ""
    out = subprocess.run(["c++filt", *symbols], stdout=subprocess.PIPE, text=True).stdout.strip()
    return f" (demangled: {out})" if out and out not in symbols else ""


def _build_and_import(call: InlineArgs, arch: str | None):
    """Build, import, record. When this builder fails anywhere but in the candidate's own lines, torch's own
    load_inline builds it (`torch_fallback`), so nothing that torch builds is refused."""
    try:
        built = build_inline(**call.build_kwargs(), arch=arch)
    except CudaCompileError as exc:
        if exc.in_own_code:
            raise
        return torch_fallback(call, str(exc))
    start = time.perf_counter()
    try:
        module = _import(built, call.is_python_module)
    except ImportError as exc:
        if not built.cache_hit:
            return torch_fallback(call, f"extension {call.name!r} was built but cannot be imported: "
                                        f"{exc}{_demangle(str(exc))}")
        _discard(built)  # a cached library that does not load is rebuilt, never trusted
        built = build_inline(**call.build_kwargs(), arch=arch)
        built.notes.append(f"the cached library did not import ({exc}): rebuilt")
        start = time.perf_counter()
        try:
            module = _import(built, call.is_python_module)
        except ImportError as again:
            return torch_fallback(call, f"extension {call.name!r} was built but cannot be imported: {again}")
    built.steps["import"] = round(time.perf_counter() - start, 3)
    built.seconds = round(built.seconds + built.steps["import"], 3)
    BUILDS.append(built)
    return module


def torch_fallback(call: InlineArgs, why: str):
    """Build `call` with torch's own load_inline, in a build folder of its own; recorded in BUILDS with the reason.
    When torch fails too, the candidate gets both builders' errors."""
    original = _torch_load_inline()
    bound = call.torch_call
    directory = cache.build_dir() / "torch-fallback" / digest("fallback", call.name, repr(bound.arguments))[:24]
    directory.mkdir(parents=True, exist_ok=True)
    bound.arguments["build_directory"] = str(directory)
    start = time.perf_counter()
    try:
        module = original(*bound.args, **bound.kwargs)
    except Exception as exc:  # noqa: BLE001 - torch's own verdict on the candidate's sources
        text = str(exc)
        raise CudaCompileError(f"{why}\n\ntorch's own load_inline failed too:\n{compiler_errors(text)}",
                               trim_log(text, max_lines=120), in_own_code=True) from None
    seconds = round(time.perf_counter() - start, 3)
    note = f"kernelskill's builder failed ({why.splitlines()[0][:300]}); built by torch's own load_inline"
    BUILDS.append(BuiltExtension(call.name, call.name, "", directory, False, seconds, {"torch": seconds}, "", [],
                                 [note], None, "torch"))
    return module
