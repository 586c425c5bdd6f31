"""A drop-in `load_inline` that builds candidates' CUDA/C++ extensions fast and caches them by content.

torch's `load_inline` prepends `<torch/extension.h>` to the C++ translation unit and `<torch/types.h>` to the CUDA one,
then runs ninja; a cold build of a trivial kernel spends most of its ~30 s parsing PyTorch's headers. Here:

- the finished extension is cached under `$KERNELSKILL_CACHE/cuda-build/<key>/`, the key a hash of everything that
  can change the binary, so a source built once (by any worker process) is imported again in well under a second.
  Builds happen in a temporary sibling folder renamed into place, one at a time per key (`fcntl.flock`); the
  cache's layout, its locks and its pruning are in `build_cache`;
- the C++ unit (cpp_sources + the pybind11 bindings torch would generate) is compiled with a precompiled
  `<torch/extension.h>`; objects are cached on their own too. The module name derives from the whole extension
  (C++ and CUDA units, flags), because a process never imports two libraries under one name;
- the CUDA unit gets no torch headers when its source does not mention torch, and a `#include <torch/extension.h>`
  in it is narrowed to the `<torch/types.h>` torch prepends anyway. A narrowed unit that fails for want of a
  declaration is compiled again exactly as torch would, so nothing torch accepts is rejected;
- nvcc's host front end (cudafe++) and device front end (cicc) run side by side rather than one after the other
  (nvcc's own `--dryrun` commands, with the module id written beforehand so neither waits for the other).

Flags mirror `torch.utils.cpp_extension` of the installed torch (include paths, -std, defines, libraries), so the
binary is the one torch would link. `scripts/build_bench.py` measures all this against plain `load_inline`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from kernelskill.review import build_cache
from kernelskill.review.build_cache import file_sha, flock, touch
from kernelskill.review.inline_args import InlineArgs, _torch_load_inline, bind, split_flags
from kernelskill.review.logs import compiler_errors, filter_header_warnings, trim_log

BUILDER_VERSION = "3"  # bump when a change here can change the binary built from the same inputs
OWN_FILES = ("main.cpp", "cuda.cu")


class CudaCompileError(Exception):
    """The candidate's CUDA or C++ sources do not compile. The message leads with the compiler's errors.

    `in_own_code`: the compiler's errors point at the candidate's own lines (main.cpp, cuda.cu), so torch's
    load_inline, which compiles the same text with the same flags, fails the same way. Any other failure (a link
    error, a flag the compiler refuses, an error inside a header, a library that does not import) may be this
    builder's, and `load_inline` then builds the candidate with torch's own function before giving a verdict.
    """

    def __init__(self, message: str, log: str, in_own_code: bool = False) -> None:
        super().__init__(message)
        self.log = log
        self.in_own_code = in_own_code


_OWN_ERROR = re.compile(r"\b(main\.cpp|cuda\.cu)(:\d+|\(\d+\)).*\berror\b", re.IGNORECASE)


# ----------------------------------------------------------------------------------------------------------- sources
def _join(sources) -> str:
    return "\n".join(sources) if isinstance(sources, (list, tuple)) else (sources or "")


def _bindings(functions, with_pytorch_error_handling: bool = True) -> str:
    """The PYBIND11_MODULE block load_inline generates for `functions` (a name, a list of names, or name -> doc)."""
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, dict):
        items = list(functions.items())
    elif isinstance(functions, (list, tuple)) or functions is None:
        items = [(f, f) for f in (functions or [])]
    else:
        raise ValueError(f"Expected 'functions' to be a list or dict, but was {type(functions)}")
    wrap = "torch::wrap_pybind_function({})" if with_pytorch_error_handling else "{}"
    defs = "\n".join(f'  m.def("{name}", {wrap.format(name)}, "{doc}");' for name, doc in items)
    return f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}\n}}\n" if defs else ""


_TORCH_PREFIX = ("#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>")
_NO_TORCH_LINE = "// <torch/types.h> left out: this CUDA source does not mention torch (kernelskill cuda_build)"
# Conservative: any mention means the source may need torch's declarations.
_USES_TORCH = re.compile(r"torch|\bat::|namespace\s+at\b|c10|ATen|TORCH_|\bAT_|\bC10_")
_EXTENSION_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]torch/extension\.h[>\"][^\n]*$", re.MULTILINE)
# What <torch/extension.h> declares beyond <torch/types.h>: Python bindings and the C++ frontend's namespaces.
_NEEDS_EXTENSION_H = re.compile(
    r"pybind11|PYBIND11|py::|Python\.h|PyObject|THP|torch/python|TORCH_LIBRARY|torch::(nn|optim|data|jit|serialize|"
    r"fft|linalg|special|nested|sparse|cuda|mps|xpu|enumtype|python)\b"
)
# Errors a narrowed CUDA unit gives when it misses a declaration that torch's headers would have brought in.
_MISSING_DECLARATION = re.compile(
    r"is undefined|was not declared|has no member|is not a member|has not been declared|does not name a type|"
    r"incomplete type|no instance of|more than one instance|no matching function|is ambiguous|"
    r"must be a class or namespace|is not a template|not a class or namespace|unknown type name|"
    r"explicit type is missing"
)


# A CUDA source that uses torch only for the usual host wrapper (torch::Tensor, empty/zeros, data_ptr, TORCH_CHECK,
# the dtype constants) compiles against ATen's core headers in a fraction of the time <torch/types.h> takes (it
# pulls in every operator's declaration). Tried first for such sources; a missing declaration falls back as above.
_CORE_PRELUDE = "\n".join([
    "// torch's core headers only (kernelskill cuda_build); a missing declaration recompiles with <torch/types.h>",
    "#include <ATen/core/Tensor.h>",
    *(f"#include <ATen/ops/{op}.h>" for op in ("empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones",
                                               "ones_like", "full", "full_like", "arange")),
    "#include <c10/util/Exception.h>",
    "namespace torch {",
    "using namespace at;  // NOLINT",
    *(f"constexpr auto {alias} = at::{name};" for alias, name in (
        ("kUInt8", "kByte"), ("kInt8", "kChar"), ("kInt16", "kShort"), ("kInt32", "kInt"), ("kInt64", "kLong"),
        ("kFloat16", "kHalf"), ("kFloat32", "kFloat"), ("kFloat64", "kDouble"), ("kBFloat16", "kBFloat16"),
        ("kBool", "kBool"))),
    "}  // namespace torch",
    "#include <cuda.h>",
    "#include <cuda_runtime.h>",
    f"#line {len(_TORCH_PREFIX) + 1}",  # the source's lines keep the numbers torch's unit gives them
])
# Any torch header of its own (other than <torch/extension.h>, narrowed below) rules the core prelude out.
_OTHER_TORCH_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]torch/(?!extension\.h)", re.MULTILINE)


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n")


def cuda_variants(cuda_sources, no_implicit_headers: bool = False) -> list[tuple[str, str]]:
    """(variant, text) for the CUDA unit, fastest first; the last is exactly what torch's load_inline compiles."""
    body = _normalize(_join(cuda_sources))
    if no_implicit_headers:
        return [("exact", body)]
    exact = "\n".join([*_TORCH_PREFIX, body])
    if not _USES_TORCH.search(body):
        return [("torch-free", "\n".join([_NO_TORCH_LINE, *_TORCH_PREFIX[1:], body])), ("exact", exact)]
    if _NEEDS_EXTENSION_H.search(body):
        return [("exact", exact)]
    narrowed = _EXTENSION_INCLUDE.sub(
        "// #include <torch/extension.h> narrowed to the prelude above (kernelskill cuda_build)", body)
    variants = [] if _OTHER_TORCH_INCLUDE.search(body) else [("core", "\n".join([_CORE_PRELUDE, narrowed]))]
    if narrowed != body:
        variants.append(("types.h", "\n".join([*_TORCH_PREFIX, narrowed])))
    return [*variants, ("exact", exact)]


# --------------------------------------------------------------------------------------------------------- toolchain
def cache_root() -> Path:
    return build_cache.build_dir()


def _sha(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


@cache
def _version_of(argv: tuple[str, ...]) -> str:
    try:
        proc = subprocess.run([*argv, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {exc}"
    return proc.stdout.strip()


def _cxx() -> list[str]:
    return shlex.split(os.environ.get("CXX") or "c++")  # torch's get_cxx_compiler()


@cache
def cuda_home() -> str | None:
    """The CUDA toolkit root, found as torch finds it, plus the layouts where `nvcc` on PATH is a wrapper script."""
    from torch.utils import cpp_extension

    nvcc = shutil.which("nvcc")
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), getattr(cpp_extension, "CUDA_HOME", None),
                  str(Path(nvcc).resolve().parent.parent) if nvcc else None, "/usr/local/cuda"]
    for home in candidates:
        if home and (Path(home) / "bin" / "nvcc").exists() and (Path(home) / "include" / "cuda_runtime.h").exists():
            return home
    return None


def _nvcc() -> list[str]:
    if os.environ.get("PYTORCH_NVCC"):
        return shlex.split(os.environ["PYTORCH_NVCC"])
    home = cuda_home()
    if home is None:
        found = shutil.which("nvcc")
        if found is None:
            raise CudaCompileError("nvcc was not found: install the CUDA toolkit or set CUDA_HOME", "")
        return [found]
    return [str(Path(home) / "bin" / "nvcc")]


@cache
def _torch_facts() -> dict:
    """What in torch decides flags and ABI: version, -std used by its JIT builder, include and library folders."""
    import torch
    from torch.utils import cpp_extension

    std = "-std=c++17"
    with contextlib.suppress(AttributeError, OSError, TypeError):
        found = re.findall(r"-std=c\+\+\d+", inspect.getsource(cpp_extension._write_ninja_file_to_build_library))
        std = found[0] if found else std
    pybind_abi: list[str] = []
    if hasattr(cpp_extension, "_get_pybind11_abi_build_flags"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pybind_abi = list(cpp_extension._get_pybind11_abi_build_flags())
    return {
        "torch": torch.__version__,
        "git": getattr(torch.version, "git_version", ""),
        "cuda": torch.version.cuda,
        "cxx11_abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
        "std": std,
        "pybind_abi": pybind_abi,
        "includes": list(cpp_extension.include_paths()),  # the CPU set; every torch version's default
        "lib": cpp_extension.TORCH_LIB_PATH,
        "nvcc_flags": list(getattr(cpp_extension, "COMMON_NVCC_FLAGS", [
            "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"])),
        "python": [sysconfig.get_config_var("EXT_SUFFIX"), sys.implementation.cache_tag],
        "python_include": sysconfig.get_path("include", scheme="posix_prefix"),
    }


_ENV_THAT_MATTERS = ("CC", "CXX", "CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "LIBRARY_PATH", "PYTORCH_NVCC",
                     "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CUDA_HOME", "CUDA_PATH")


def _fingerprint(with_nvcc: bool) -> dict:
    cxx = _cxx()
    found = shutil.which(cxx[0])
    out = {"builder": BUILDER_VERSION, "torch": _torch_facts(), "cxx": [str(Path(found).resolve()) if found else cxx[0],
           _version_of(tuple(cxx))], "env": {k: os.environ.get(k) for k in _ENV_THAT_MATTERS}}
    if with_nvcc:
        out["nvcc"] = _version_of(tuple(_nvcc()))
        out["nvcc_host"] = _version_of((os.environ.get("CC") or "gcc",))
    return out


def _system_includes(with_cuda: bool) -> list[str]:
    facts = _torch_facts()
    paths = list(facts["includes"])
    if with_cuda:  # torch's include_paths("cuda"), also where torch itself was built without CUDA
        home = cuda_home()
        if home and os.path.join(home, "include") != "/usr/include":
            paths.append(os.path.join(home, "include"))
        if os.environ.get("CUDA_INC_PATH", "/usr/include") != "/usr/include":
            paths.append(os.environ["CUDA_INC_PATH"])
        if os.environ.get("CUDNN_HOME") or os.environ.get("CUDNN_PATH"):
            paths.append(os.path.join(os.environ.get("CUDNN_HOME") or os.environ["CUDNN_PATH"], "include"))
    if facts["python_include"]:
        paths.append(facts["python_include"])
    return paths


def arch_flags(arch: str | list[str] | None, extra_cuda_cflags: list[str]) -> list[str]:
    """-gencode flags as torch makes them; none when the candidate names an arch itself (torch's rule)."""
    if any("arch" in f and "TORCH_EXTENSION_NAME" not in f for f in extra_cuda_cflags):
        return []
    if arch is None:  # torch's order: the environment first, then the visible device
        import torch

        if os.environ.get("TORCH_CUDA_ARCH_LIST", "native") != "native":
            arch = os.environ["TORCH_CUDA_ARCH_LIST"]
        elif torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            arch = f"{major}.{minor}+PTX"  # torch adds PTX for the newest visible arch
        else:
            raise ValueError("no CUDA device is visible, so the target arch is unknown: pass arch='9.0' (or 'sm_90') "
                             "or set TORCH_CUDA_ARCH_LIST=9.0")
    items = arch if isinstance(arch, (list, tuple)) else re.split(r"[;\s,]+", arch.strip())
    flags = []
    for item in filter(None, items):
        ptx = item.endswith("+PTX")
        m = re.fullmatch(r"(?:sm_|compute_)?(\d+)\.?(\d)([af]?)", item.removesuffix("+PTX"))
        if not m:
            raise ValueError(f"unknown CUDA arch {item!r}: use a form like '9.0', '9.0a', 'sm_90' or '9.0+PTX'")
        num = f"{m.group(1)}{m.group(2)}{m.group(3)}"
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return sorted(set(flags))


# -------------------------------------------------------------------------------------------------------------- plan
@dataclass
class Unit:
    """One translation unit: its text, the compiler command without input/output, and the key of its object."""

    kind: str  # "cpp" or "cuda"
    variant: str  # "exact", "torch-free", "types.h"
    filename: str
    text: str
    argv: list[str]
    key: str


@dataclass
class BuildPlan:
    """Everything a build will do, computed without compiling anything."""

    name: str
    module_name: str
    key: str
    cpp: Unit
    cuda: list[Unit]  # attempts, fastest first; empty without CUDA sources
    link_flags: list[str]
    pch_flags: list[str]  # the C++ unit's flags, without the module name: what the precompiled header must match
    with_cuda: bool


def plan_build(name: str, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
               extra_ldflags=None, extra_include_paths=None, with_cuda: bool | None = None,
               with_pytorch_error_handling: bool = True, no_implicit_headers: bool = False,
               arch: str | list[str] | None = None) -> BuildPlan:
    # as torch's ninja file reads them: blank flags vanish, "-O3 -lineinfo" is two flags
    extra_cflags, extra_cuda_cflags = split_flags(extra_cflags), split_flags(extra_cuda_cflags)
    extra_ldflags = split_flags(extra_ldflags)
    has_cuda = bool(_join(cuda_sources).strip())
    with_cuda = has_cuda if with_cuda is None else with_cuda
    facts = _torch_facts()
    includes = ([f"-I{os.path.abspath(p.strip())}" for p in extra_include_paths or []]
                + [a for p in _system_includes(with_cuda) for a in ("-isystem", p)])
    common = ["-DTORCH_API_INCLUDE_EXTENSION_H", *includes, f"-D_GLIBCXX_USE_CXX11_ABI={facts['cxx11_abi']}",
              *facts["pybind_abi"]]

    cpp_text = _normalize(("" if no_implicit_headers else "#include <torch/extension.h>\n") + _join(cpp_sources)
                          + _bindings(functions, with_pytorch_error_handling))
    pch_flags = [*common, "-fPIC", facts["std"], *extra_cflags]
    nvcc_flags = [*common, *facts["nvcc_flags"], *arch_flags(arch, extra_cuda_cflags), "--compiler-options", "-fPIC",
                  *extra_cuda_cflags] if has_cuda else []
    if has_cuda and not any(f.startswith("-std=") for f in nvcc_flags):
        nvcc_flags.append(facts["std"])
    variants = cuda_variants(cuda_sources, no_implicit_headers) if has_cuda else []

    lib = facts["lib"]
    link = ["-shared", *extra_ldflags, f"-L{lib}", "-lc10", *(["-lc10_cuda"] if with_cuda else []), "-ltorch_cpu",
            *(["-ltorch_cuda"] if with_cuda else []), "-ltorch", "-ltorch_python"]
    if with_cuda:
        home = cuda_home()
        libdir = "lib64" if home is None or (Path(home) / "lib64").exists() or not (Path(home) / "lib").exists() \
            else "lib"
        link += [f"-L{os.path.join(home or '/usr/local/cuda', libdir)}", "-lcudart"]

    # The module name derives from everything in the extension, C++ and CUDA alike: a process never imports two
    # libraries under one name (Python hands back the module it already has for a name, so a second candidate
    # with the same C++ glue and new kernels would silently run the first one's code).
    module_name = "ks_" + _sha("module", _fingerprint(has_cuda), cpp_text, pch_flags, [t for _, t in variants],
                               nvcc_flags, link, with_cuda)[:16]
    define = f"-DTORCH_EXTENSION_NAME={module_name}"
    cpp_key = _sha("cpp", _fingerprint(False), cpp_text, pch_flags, define)
    cpp = Unit("cpp", "exact", "main.cpp", cpp_text, [*_cxx(), define, *pch_flags], cpp_key)

    cuda: list[Unit] = []
    if has_cuda:
        argv = [*_nvcc(), *(["-ccbin", os.environ["CC"]] if os.environ.get("CC") else []), define, *nvcc_flags]
        fingerprint = _fingerprint(True)
        for variant, text in variants:
            cuda.append(Unit("cuda", variant, "cuda.cu", text, argv, _sha("cuda", fingerprint, text, argv)))
    key = _sha("so", cpp.key, cuda[-1].key if cuda else None, link, with_cuda)
    return BuildPlan(name, module_name, key, cpp, cuda, link, pch_flags, with_cuda)


# ----------------------------------------------------------------------------------------------- processes and locks
_CANCELLED = "(cancelled: another step failed)"


class _Runner:
    """Runs compiler processes; cancelling kills the ones alive (and makes later ones fail at once)."""

    def __init__(self, parent: _Runner | None = None) -> None:
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._cancelled = False
        self._parent = parent
        self._children: list[_Runner] = []
        if parent is not None:
            parent._children.append(self)

    def cancelled(self) -> bool:
        return self._cancelled or (self._parent is not None and self._parent.cancelled())

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            procs = list(self._procs)
        for proc in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for child in self._children:
            child.cancel()

    def run(self, argv: list[str], cwd: Path, env: dict | None = None) -> tuple[int, str, float]:
        start = time.perf_counter()
        with self._lock:
            if self.cancelled():
                return -9, _CANCELLED, 0.0
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace", start_new_session=True)
            self._procs.add(proc)
        try:
            out, _ = proc.communicate()
        finally:
            with self._lock:
                self._procs.discard(proc)
        return proc.returncode, out, time.perf_counter() - start


def _command(argv: list[str]) -> str:
    return "$ " + " ".join(shlex.quote(a) for a in argv)


# ------------------------------------------------------------------------------------------- precompiled header (PCH)
_PCH_HEADER = "ks_torch_extension.h"
_HEADER_TREE = re.compile(r"^(\.+|!|x) \S")


def _pch_dir(pch_flags: list[str]) -> Path:
    return cache_root() / "pch" / _sha("pch", _fingerprint(False), pch_flags)[:24]


def _pch_ready(directory: Path) -> bool:
    return (directory / "pch.json").is_file() and (directory / f"{_PCH_HEADER}.gch").is_file()


def _build_pch(directory: Path, pch_flags: list[str], runner: _Runner) -> tuple[bool, float, str]:
    """Compile <torch/extension.h> once for these flags. Caller holds the PCH lock. Returns (ok, seconds, log)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / _PCH_HEADER).write_text("#include <torch/extension.h>\n")
    tmp = f"{_PCH_HEADER}.gch.{os.getpid()}.tmp"
    argv = [*_cxx(), *pch_flags, "-x", "c++-header", _PCH_HEADER, "-o", tmp]
    code, out, seconds = runner.run(argv, directory)
    log = f"{_command(argv)}\n{out}"
    if code != 0:
        with contextlib.suppress(FileNotFoundError):
            (directory / tmp).unlink()
        return False, seconds, log
    os.replace(directory / tmp, directory / f"{_PCH_HEADER}.gch")
    (directory / "pch.json").write_text(json.dumps({"argv": argv, "seconds": round(seconds, 2)}))
    return True, seconds, log


def prepare_pch(extra_cflags: list[str] | None = None, extra_include_paths: list[str] | None = None,
                with_cuda: bool | None = None) -> float:
    """Build the precompiled header that later builds with these flags will use; waits if another process is
    building it. Returns the seconds spent building (0.0 when it was already there). Call it in the background at
    the start of a run, once per flag set in use (most candidates pass no extra_cflags, some pass ["-O3"])."""
    import torch

    if with_cuda is None:
        with_cuda = torch.version.cuda is not None and cuda_home() is not None
    plan = plan_build("prepare_pch", "", None, None, extra_cflags, with_cuda=with_cuda,
                      extra_include_paths=extra_include_paths)
    directory = _pch_dir(plan.pch_flags)
    if _pch_ready(directory):
        touch(directory / "pch.json")
        return 0.0
    with flock(build_cache.pch_lock(directory.name)):
        if _pch_ready(directory):
            return 0.0
        ok, seconds, log = _build_pch(directory, plan.pch_flags, _Runner())
        if not ok:
            raise CudaCompileError("building the precompiled <torch/extension.h> failed:\n" + compiler_errors(log),
                                   trim_log(log))
        return seconds


def _clean_header_tree(out: str) -> tuple[str, bool | None]:
    """Drop gcc -H's include tree from the output; report whether the precompiled header was used."""
    used, kept, guards = None, [], False
    for line in out.splitlines():
        if line.startswith("! ") and line.endswith(".gch"):
            used = True
            continue
        if line.startswith("x ") and line.endswith(".gch"):
            used = bool(used)
            continue
        if line.startswith("Multiple include guards may be useful for:"):
            guards = True
            continue
        if _HEADER_TREE.match(line) or (guards and line.startswith("/") and ": " not in line):
            continue
        kept.append(line)
    if used is None and "-Winvalid-pch" in out:
        used = False
    return "\n".join(kept) + ("\n" if kept else ""), used


# ------------------------------------------------------------------------------------------ nvcc, phases in parallel
_DIAGNOSTIC = re.compile(r"\(\d+\): (error|catastrophic)|:\d+:(\d+:)? (fatal )?error|: error:|error: ")


def _expand(token: str, env: dict) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), token)


def _nvcc_phases(argv: list[str], cwd: Path, module_id: str, runner: _Runner) -> tuple[int, str] | None:
    """Run nvcc's steps with the host front end beside the device one. None when the dry run has a shape this does
    not know (then the caller runs nvcc itself)."""
    keep = "nvcc-keep"
    (cwd / keep).mkdir(exist_ok=True)
    dry = subprocess.run([*argv, "--dryrun", "-keep", "-keep-dir", keep], cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace")
    if dry.returncode != 0:
        return None
    env, commands = dict(os.environ), []
    for line in dry.stdout.splitlines():
        if not line.startswith("#$ "):
            continue
        body = line[3:].strip()
        assignment = re.match(r"([A-Za-z_]\w*)=(.*)$", body)
        try:
            if assignment:
                env[assignment.group(1)] = " ".join(shlex.split(assignment.group(2)))
            elif body:
                commands.append((body, shlex.split(body)))
        except ValueError:
            return None
    host, device, final = [], [], []
    for i, (body, tokens) in enumerate(commands):
        tool = os.path.basename(_expand(tokens[0], env))
        if tool == "cudafe++":
            host.append(body)
        elif tool in ("cicc", "ptxas", "fatbinary"):
            device.append(body)
        elif "-E" in tokens:
            (device if any(t.startswith("-D__CUDA_ARCH__=") for t in tokens) else host).append(body)
        elif "-c" in tokens and i == len(commands) - 1:
            final.append(body)
        else:
            return None  # nvlink, rm, or anything new: not a shape this knows
    cudafe = [c for c in host if "cudafe++" in c]
    ids = re.findall(r'--module_id_file_name\s+"?([^"\s]+)"?', dry.stdout)
    if (len(final) != 1 or len(cudafe) != 1 or len(host) != 2 or not device or len(set(ids)) != 1
            or cudafe[0].count(" --gen_module_id_file") != 1 or dry.stdout.count("--gen_module_id_file") != 1):
        return None
    # cudafe++ writes the module id that cicc reads: write it first, and both front ends can start at once.
    (cwd / ids[0]).write_text(module_id)
    host = [c.replace(" --gen_module_id_file", "") if c is cudafe[0] else c for c in host]
    phases = _Runner(runner)

    def chain(steps: list[str]) -> tuple[int, str, float]:
        outs, total = [], 0.0
        for step in steps:
            code, out, seconds = phases.run(["/bin/sh", "-c", step], cwd, env)
            outs.append(f"#$ {step}\n{out}" if out.strip() else f"#$ {step}")
            total += seconds
            if code != 0:
                phases.cancel()  # the other front end would only repeat the same errors
                return code, "\n".join(outs), total
        return 0, "\n".join(outs), total

    with ThreadPoolExecutor(max_workers=2) as pool:
        host_run, device_run = pool.submit(chain, host), pool.submit(chain, device)
        (host_code, host_out, host_s), (dev_code, dev_out, dev_s) = host_run.result(), device_run.result()
    timing = f"[nvcc phases side by side: host front end {host_s:.1f} s, device {dev_s:.1f} s"
    for code, out in ((host_code, host_out), (dev_code, dev_out)):
        if code != 0 and code != -9:
            return (code, f"{out}\n{timing}]") if _DIAGNOSTIC.search(out) else None
    if host_code or dev_code:
        return None
    code, out, final_s = phases.run(["/bin/sh", "-c", final[0]], cwd, env)
    log = f"{host_out}\n{dev_out}\n#$ {final[0]}\n{out}\n{timing}, host compile {final_s:.1f} s]"
    if code != 0 and not _DIAGNOSTIC.search(out):
        return None
    shutil.rmtree(cwd / keep, ignore_errors=True)  # preprocessed files: tens of MB with torch headers
    return code, log


# ----------------------------------------------------------------------------------------------------------- objects
@dataclass
class _Object:
    path: Path
    log: str
    seconds: float
    cached: bool
    pch_used: bool | None = None
    pch_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def _diagnostics(output: str) -> str:
    """The compiler's own output, without the command lines and timings this module adds."""
    return "\n".join(line for line in output.splitlines() if not line.startswith(("#$ ", "$ ", "[nvcc phases")))


class _ObjectVanished(Exception):
    """A cached object was removed (by `kernelskill cache prune` in another process) between lookup and link."""


class _UnitFailed(Exception):
    def __init__(self, unit: Unit, output: str, log: str) -> None:
        super().__init__(unit.filename)
        self.unit, self.output, self.log = unit, output, log


def _objects_dir() -> Path:
    return cache_root() / "obj"


def _cached_object(key: str) -> _Object | None:
    path, meta = _objects_dir() / f"{key}.o", _objects_dir() / f"{key}.json"
    try:
        info = json.loads(meta.read_text())
        if info["sha256"] != file_sha(path):
            return None
    except (OSError, ValueError, KeyError):
        return None
    touch(meta)  # used now: pruning removes the least recently used first
    return _Object(path, info.get("log", ""), 0.0, True, info.get("pch_used"), 0.0, info.get("notes", []))


def _store_object(key: str, built: Path, log: str, pch_used: bool | None, notes: list[str]) -> Path:
    directory = _objects_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{key}.o"
    tmp = directory / f".{key}.{os.getpid()}.tmp"
    shutil.copyfile(built, tmp)
    os.replace(tmp, target)
    meta_tmp = directory / f".{key}.{os.getpid()}.json.tmp"
    meta_tmp.write_text(json.dumps({"sha256": file_sha(target), "log": log, "pch_used": pch_used, "notes": notes}))
    os.replace(meta_tmp, directory / f"{key}.json")  # written last: an object without it is not trusted
    return target


def compile_unit(unit: Unit, directory: Path, *, runner: _Runner | None = None, pch_flags: list[str] | None = None,
                 parallel_nvcc: bool = True) -> _Object:
    """Compile one unit in `directory` (no cache). A C++ unit uses the precompiled header for `pch_flags` when it
    is ready, builds it first when nobody else is building it, and compiles without it otherwise."""
    runner = runner or _Runner()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / unit.filename).write_text(unit.text)
    out_name = "main.o" if unit.kind == "cpp" else "cuda.o"
    notes: list[str] = []
    pch_seconds, pch_log, extra = 0.0, "", []
    if unit.kind == "cpp" and pch_flags is not None:
        pch = _pch_dir(pch_flags)
        if not _pch_ready(pch):
            with flock(build_cache.pch_lock(pch.name), blocking=False) as mine:
                if mine and not _pch_ready(pch):
                    ok, pch_seconds, pch_log = _build_pch(pch, pch_flags, runner)
                    if runner.cancelled():
                        raise _UnitFailed(unit, _CANCELLED, pch_log)
                    if not ok:  # the unit's own compile, next, shows the error if the headers are at fault
                        notes.append("building the precompiled header failed: compiled without it")
                elif not mine:
                    notes.append("the precompiled header was being built by another process: compiled without it")
        if _pch_ready(pch):
            touch(pch / "pch.json")
            extra = ["-Winvalid-pch", "-H", "-include", str(pch / _PCH_HEADER)]
    if unit.kind == "cuda" and parallel_nvcc and os.path.basename(unit.argv[0]) == "nvcc":  # not through ccache
        argv = [*unit.argv, "-c", unit.filename, "-o", out_name]
        start = time.perf_counter()
        module_id = f"_{unit.key[:8]}_7_cuda_cu_{unit.key[8:16]}"
        phased = _nvcc_phases(argv, directory, module_id, runner)
        if phased is None:
            notes.append("nvcc's steps could not be run side by side: ran nvcc as is")
            code, out, seconds = runner.run(argv, directory)
        else:
            (code, out), seconds = phased, time.perf_counter() - start
    else:
        argv = [*unit.argv, *extra, "-c", unit.filename, "-o", out_name]
        code, out, seconds = runner.run(argv, directory)
    pch_used = None
    if unit.kind == "cpp" and extra:
        out, pch_used = _clean_header_tree(out)
        if not pch_used:
            reason = next((line for line in out.splitlines() if "Winvalid-pch" in line), "no reason given")
            notes.append(f"the precompiled header was not used ({reason.strip()})")
    log = (f"{pch_log}\n" if pch_log else "") + f"{_command(argv)}\n{out}"
    if code != 0:
        raise _UnitFailed(unit, out, log)
    return _Object(directory / out_name, log, seconds, False, pch_used, pch_seconds, notes)


def _object_for(units: list[Unit], directory: Path, runner: _Runner, pch_flags: list[str] | None,
                parallel_nvcc: bool) -> tuple[Unit, _Object]:
    """The object of the first unit that compiles, from the object cache when it is there. A narrowed unit that
    fails for want of a declaration gives way to the next one; any other failure is the candidate's."""
    notes: list[str] = []
    for i, unit in enumerate(units):
        cached = _cached_object(unit.key)
        if cached is None:
            with flock(build_cache.object_lock(unit.key)):
                cached = _cached_object(unit.key)
                if cached is None:
                    try:
                        built = compile_unit(unit, directory / unit.kind, runner=runner, pch_flags=pch_flags,
                                             parallel_nvcc=parallel_nvcc)
                    except _UnitFailed as failed:
                        last = i == len(units) - 1
                        if last or runner.cancelled() or not _MISSING_DECLARATION.search(_diagnostics(failed.output)):
                            raise
                        first = next((ln for ln in failed.output.splitlines() if "error" in ln), "").strip()
                        notes.append(f"{unit.filename} with fewer of torch's headers ({unit.variant}) failed ({first}); "
                                     "compiled again with more of them, up to what torch compiles")
                        continue
                    built.notes[:0] = notes
                    built.path = _store_object(unit.key, built.path, built.log, built.pch_used, built.notes)
                    return unit, built
        cached.notes[:0] = notes
        return unit, cached
    raise AssertionError("no units")  # unreachable: the last unit either returns or raises


# -------------------------------------------------------------------------------------------------------- extensions
@dataclass
class BuiltExtension:
    """What one build (or cache hit) produced. `steps` holds seconds per step: pch, cpp, cuda, link, check, import."""

    name: str
    module_name: str
    key: str
    so_path: Path | None
    cache_hit: bool
    seconds: float
    steps: dict[str, float] = field(default_factory=dict)
    log: str = ""
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pch_used: bool | None = None
    cuda_variant: str | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        out["so_path"] = str(self.so_path) if self.so_path else None
        return out


BUILDS: list[BuiltExtension] = []
"""What load_inline built or found in this process, in call order (the worker reports compile seconds from it)."""


def _entry(plan: BuildPlan) -> Path:
    return cache_root() / plan.key[:32]


def _finished(plan: BuildPlan, start: float) -> BuiltExtension | None:
    """The cached build, when its completion marker is there and the library matches it."""
    entry = _entry(plan)
    try:
        info = json.loads((entry / "build.json").read_text())
        so_path = entry / info["so"]
        if info["key"] != plan.key or info["so_sha256"] != file_sha(so_path):
            return None
    except (OSError, ValueError, KeyError):
        return None
    touch(entry / "build.json")
    return BuiltExtension(plan.name, plan.module_name, plan.key, so_path, True, round(time.perf_counter() - start, 3),
                          {"check": round(time.perf_counter() - start, 3)}, "", info.get("warnings", []),
                          info.get("notes", []), info.get("pch_used"), info.get("cuda_variant"))


def build_inline(name: str, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
                 extra_ldflags=None, extra_include_paths=None, with_cuda: bool | None = None,
                 with_pytorch_error_handling: bool = True, no_implicit_headers: bool = False,
                 arch: str | list[str] | None = None, pch: bool = True, parallel_nvcc: bool = True,
                 link: bool = True, verbose: bool = False) -> BuiltExtension:
    """Build (or find in the cache) the extension load_inline would build from these arguments; do not import it.

    `arch` is needed when no GPU is visible (prebuilding on CPU cores). `link=False` compiles the objects only
    (a compile check where torch's CUDA libraries are missing). Raises CudaCompileError with the compiler's errors.
    """
    start = time.perf_counter()
    plan = plan_build(name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags, extra_ldflags,
                      extra_include_paths, with_cuda, with_pytorch_error_handling, no_implicit_headers, arch)
    failed = build_cache.remembered_failure(plan.key)
    if failed is not None:  # the same sources, flags and toolchain failed in their own lines before
        raise CudaCompileError(f"{failed['message']}\n(remembered from an earlier build of the same sources; the "
                               f"full log is in {build_cache.failures_dir()})", failed.get("log", ""), in_own_code=True)
    try:
        return _build_or_find(plan, start, pch, parallel_nvcc, link, verbose)
    except CudaCompileError as exc:
        if exc.in_own_code:
            build_cache.remember_failure(plan.key, str(exc), exc.log)
        raise


def _build_or_find(plan: BuildPlan, start: float, pch: bool, parallel_nvcc: bool, link: bool,
                   verbose: bool) -> BuiltExtension:
    if link:
        found = _finished(plan, start)
        if found is not None:
            return found
        with flock(build_cache.extension_lock(plan.key)):
            found = _finished(plan, start)  # another process may have built it while this one waited
            if found is not None:
                return found
            return _build_retrying(plan, start, pch, parallel_nvcc, link, verbose)
    return _build_retrying(plan, start, pch, parallel_nvcc, link, verbose)


def _build_retrying(plan: BuildPlan, start: float, pch: bool, parallel_nvcc: bool, link: bool,
                    verbose: bool) -> BuiltExtension:
    try:
        return _build(plan, start, pch, parallel_nvcc, link, verbose)
    except _ObjectVanished:
        return _build(plan, start, pch, parallel_nvcc, link, verbose)  # the objects are compiled afresh now


def _build(plan: BuildPlan, start: float, pch: bool, parallel_nvcc: bool, link: bool, verbose: bool) -> BuiltExtension:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    entry = _entry(plan)
    if link and entry.exists():
        shutil.rmtree(entry, ignore_errors=True)  # no completion marker, or a library that does not match it
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{plan.key[:12]}-", dir=root))
    runner = _Runner()
    jobs = [("cpp", [plan.cpp])] + ([("cuda", plan.cuda)] if plan.cuda else [])
    first_failure: list[_UnitFailed] = []
    guard = threading.Lock()

    def job(units: list[Unit]) -> tuple[Unit, _Object]:
        try:
            return _object_for(units, tmp, runner, plan.pch_flags if pch else None, parallel_nvcc)
        except _UnitFailed as failed:
            with guard:
                if not first_failure:  # the other unit fails next, killed: its output is not the candidate's
                    first_failure.append(failed)
            runner.cancel()
            raise
        except BaseException:
            runner.cancel()
            raise

    try:
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            futures = [(kind, pool.submit(job, units)) for kind, units in jobs]
            results = {}
            for kind, future in futures:
                with contextlib.suppress(_UnitFailed):
                    results[kind] = future.result()
        if first_failure:
            failed = first_failure[0]
            label = "CUDA sources (cuda.cu, nvcc)" if failed.unit.kind == "cuda" else "C++ sources (main.cpp)"
            diagnostics = _diagnostics(failed.output)
            raise CudaCompileError(f"extension {plan.name!r}: the {label} failed to compile:\n"
                                   + compiler_errors(diagnostics), trim_log(failed.log, max_lines=120),
                                   in_own_code=bool(_OWN_ERROR.search(diagnostics)))
        objects = [results[kind][1] for kind, _ in jobs]
        log = "\n".join(o.log for o in objects if not o.cached)
        notes = [n for o in objects for n in o.notes] + [
            f"{o.path.name} reused from the object cache" for o in objects if o.cached]
        steps = {"pch": round(objects[0].pch_seconds, 3)} if objects[0].pch_seconds else {}
        for kind, _ in jobs:
            steps[kind] = round(results[kind][1].seconds, 3)
        cuda_variant = results["cuda"][0].variant if "cuda" in results else None
        for kind, (unit, _) in results.items():
            (tmp / unit.filename).write_text(unit.text)
        warnings = filter_header_warnings("\n".join(o.log for o in objects), OWN_FILES)
        so_path = None
        if link:
            so_name = f"{plan.module_name}.so"
            argv = [*_cxx(), *[str(o.path) for o in objects], *plan.link_flags, "-o", so_name]
            code, out, seconds = runner.run(argv, tmp)
            steps["link"] = round(seconds, 3)
            log += f"\n{_command(argv)}\n{out}"
            if code != 0:
                if any(not o.path.exists() for o in objects):  # pruned from the object cache meanwhile: not the
                    raise _ObjectVanished(plan.name)            # candidate's fault, compile again
                raise CudaCompileError(f"extension {plan.name!r}: linking failed:\n" + compiler_errors(out),
                                       trim_log(log, max_lines=120))
            (tmp / "build.log").write_text(log)
            info = {"key": plan.key, "name": plan.name, "module_name": plan.module_name, "so": so_name,
                    "so_sha256": file_sha(tmp / so_name), "builder": BUILDER_VERSION, "pid": os.getpid(),
                    "created": time.time(), "steps": steps, "warnings": warnings, "notes": notes,
                    "pch_used": objects[0].pch_used, "cuda_variant": cuda_variant}
            (tmp / "build.json").write_text(json.dumps(info, indent=1))  # the completion marker
            for kind, _ in jobs:  # objects live in the object cache
                shutil.rmtree(tmp / kind, ignore_errors=True)
            tmp.chmod(0o755)  # mkdtemp makes it private
            os.rename(tmp, entry)
            so_path = entry / so_name
        if verbose:
            print(log)
        compiled_from_cache = not link and all(o.cached for o in objects)  # a compile check seen before
        return BuiltExtension(plan.name, plan.module_name, plan.key, so_path, compiled_from_cache,
                              round(time.perf_counter() - start, 3), steps, log, warnings, notes,
                              objects[0].pch_used, cuda_variant)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------------- load_inline
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
    with flock(build_cache.extension_lock(built.key)):
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


def load_inline(*args, **kwargs):
    """Stands in for torch.utils.cpp_extension.load_inline: the same arguments (bound by torch's own signature), the
    same module, built by build_inline.

    `build_directory`, `keep_intermediates` and `use_pch` are accepted and ignored: builds live in the cache
    (sources and logs are kept there) and always use this module's precompiled header. When this builder fails
    anywhere but in the candidate's own lines, torch's own load_inline builds it (`torch_fallback`), so nothing
    that torch builds is refused.
    """
    call = bind(*args, **kwargs)
    try:
        built = build_inline(**call.build_kwargs())
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
        built = build_inline(**call.build_kwargs())
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
    directory = cache_root() / "torch-fallback" / _sha("fallback", call.name, repr(bound.arguments))[:24]
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


def install() -> None:
    """Make `torch.utils.cpp_extension.load_inline` (and names imported from it afterwards) this builder."""
    import torch.utils.cpp_extension as cpp_extension

    cpp_extension.load_inline = load_inline
