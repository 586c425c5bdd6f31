"""The arguments of `torch.utils.cpp_extension.load_inline`, as torch itself reads them.

Every stand-in for `load_inline` (the GPU builder, the CPU compile check, the prebuild) binds a candidate's call
here, so all three accept exactly what the installed torch accepts: positional or keyword arguments in torch's own
order (which gained `sycl_sources` in 2.7), sources as a string or a list, `functions` as a name, a list or a dict,
and flags the way torch's ninja file uses them. torch strips each flag and joins them with spaces into a shell
command, so an empty or blank flag (`extra_cflags=['']`, as KernelBench's own prompt example writes) disappears,
and `'-O3 --use_fast_math'` is two flags; here each flag is split as that shell would split it.
"""

from __future__ import annotations

import inspect
import os
import shlex
from dataclasses import dataclass, field


def _capture():
    import torch.utils.cpp_extension as cpp_extension

    fn = cpp_extension.load_inline
    # Every stand-in module imports this one before it installs itself, so this is still torch's own function.
    assert fn.__module__ == "torch.utils.cpp_extension", f"load_inline was replaced before {__name__} was imported"
    return fn


_TORCH_LOAD_INLINE = _capture()


def _torch_load_inline():
    """torch's own function, also after a stand-in was installed in its place."""
    return _TORCH_LOAD_INLINE


def torch_signature() -> inspect.Signature:
    return inspect.signature(_torch_load_inline())


def split_flags(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # torch would iterate the characters and fail; a string of flags is meant
        value = [value]
    out: list[str] = []
    for flag in value:
        out += shlex.split(str(flag))
    return out


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
        """The keyword arguments of `cuda_build.build_inline`."""
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
