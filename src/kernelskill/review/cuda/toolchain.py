"""The toolchain a build uses: the compilers and their versions, torch's flags and ABI, target archs, and a runner
that starts compiler processes and kills them all when one step fails.

Everything that can change a binary built from the same sources is in `fingerprint`, which goes into every cache key.
"""

from __future__ import annotations

import contextlib
import hashlib
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
import threading
import time
from functools import cache
from pathlib import Path

from kernelskill.review.cuda import CudaCompileError

BUILDER_VERSION = "4"  # bump when a change in this package can change the binary built from the same inputs, or
# its verdict on them: 4 forgets the compile failures remembered when a narrowed unit's error was taken for the
# candidate's own (issue 33)


def digest(*parts) -> str:
    """The cache key of `parts` (any JSON-able values)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


@cache
def _version_of(argv: tuple[str, ...]) -> str:
    try:
        proc = subprocess.run([*argv, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {exc}"
    return proc.stdout.strip()


def cxx() -> list[str]:
    return shlex.split(os.environ.get("CXX") or "c++")  # torch's get_cxx_compiler()


@cache
def cuda_home() -> str | None:
    """The CUDA toolkit root, found as torch finds it, plus the layouts where `nvcc` on PATH is a wrapper script."""
    from torch.utils import cpp_extension

    nvcc_on_path = shutil.which("nvcc")
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), getattr(cpp_extension, "CUDA_HOME", None),
                  str(Path(nvcc_on_path).resolve().parent.parent) if nvcc_on_path else None, "/usr/local/cuda"]
    for home in candidates:
        if home and (Path(home) / "bin" / "nvcc").exists() and (Path(home) / "include" / "cuda_runtime.h").exists():
            return home
    return None


def nvcc() -> list[str]:
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
def torch_facts() -> dict:
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


def fingerprint(with_nvcc: bool) -> dict:
    """Builder, torch, compilers and the environment they read: part of every key."""
    compiler = cxx()
    found = shutil.which(compiler[0])
    out = {"builder": BUILDER_VERSION, "torch": torch_facts(),
           "cxx": [str(Path(found).resolve()) if found else compiler[0], _version_of(tuple(compiler))],
           "env": {k: os.environ.get(k) for k in _ENV_THAT_MATTERS}}
    if with_nvcc:
        out["nvcc"] = _version_of(tuple(nvcc()))
        out["nvcc_host"] = _version_of((os.environ.get("CC") or "gcc",))
    return out


def system_includes(with_cuda: bool) -> list[str]:
    facts = torch_facts()
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


def cuda_libdir() -> str:
    """Where libcudart is, as torch's library_paths("cuda") finds it."""
    home = cuda_home()
    libdir = "lib64" if home is None or (Path(home) / "lib64").exists() or not (Path(home) / "lib").exists() else "lib"
    return os.path.join(home or "/usr/local/cuda", libdir)


def listed_arch() -> str | None:
    """TORCH_CUDA_ARCH_LIST, unless unset or `native`."""
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    return listed if listed and listed != "native" else None


def default_arch(capability: str) -> str:
    """What a build targets when the candidate names no arch, for a GPU of `capability` ("9.0"): torch's rule,
    TORCH_CUDA_ARCH_LIST when set, else the device's arch with PTX ("9.0+PTX"). The one rule for a review's runner
    (which sees the GPU) and a prebuild (which sees none and is told the capability): the arch is part of a build's
    cache key, and a prebuild for "9.0" was never found by a review that built for "9.0+PTX"."""
    return listed_arch() or f"{capability}+PTX"


def arch_flags(arch: str | list[str] | None, extra_cuda_cflags: list[str]) -> list[str]:
    """-gencode flags as torch makes them; none when the candidate names an arch itself (torch's rule)."""
    if any("arch" in f and "TORCH_EXTENSION_NAME" not in f for f in extra_cuda_cflags):
        return []
    if arch is None:  # torch's order: the environment first, then the visible device
        import torch

        if listed_arch():
            arch = listed_arch()
        elif torch.cuda.is_available():
            arch = default_arch("%d.%d" % torch.cuda.get_device_capability())
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


# ---------------------------------------------------------------------------------------------------------- processes
CANCELLED = "(cancelled: another step failed)"


class Runner:
    """Runs compiler processes; cancelling kills the ones alive (and makes later ones fail at once)."""

    def __init__(self, parent: Runner | None = None) -> None:
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._cancelled = False
        self._parent = parent
        self._children: list[Runner] = []
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
                return -9, CANCELLED, 0.0
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace", start_new_session=True)
            self._procs.add(proc)
        try:
            out, _ = proc.communicate()
        finally:
            with self._lock:
                self._procs.discard(proc)
        return proc.returncode, out, time.perf_counter() - start


def command_line(argv: list[str]) -> str:
    """A command as the build log shows it."""
    return "$ " + " ".join(shlex.quote(a) for a in argv)


# ------------------------------------------------------------------------------------ the host compiler nvcc runs
def expand(token: str, env: dict) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), token)


@cache
def _host_command(argv: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kernelskill-dryrun-") as cwd:
        found = _dry_host_command(list(argv), Path(cwd))
    return None if found is None else (tuple(found[0]), tuple(found[1]))


def host_command(argv: list[str]) -> tuple[list[str], list[str]] | None:
    """The host compiler and its flags as nvcc runs them for a C++ file compiled with the nvcc flags in `argv`
    (`-x c++`: the host side of every flag, -O, -Xcompiler, -D and the include folders alike), without the input and
    output; None when nvcc's dry run has a shape this does not know. Asked of nvcc once per process and flag set."""
    found = _host_command(tuple(argv))
    return None if found is None else (list(found[0]), list(found[1]))


def _dry_host_command(argv: list[str], cwd: Path) -> tuple[list[str], list[str]] | None:
    dry = subprocess.run([*argv, "-x", "c++", "-c", "host.cpp", "-o", "host.o", "--dryrun"], cwd=cwd,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    if dry.returncode != 0:
        return None
    env, commands = dict(os.environ), []
    for line in dry.stdout.splitlines():
        body = line[3:].strip() if line.startswith("#$ ") else ""
        assignment = re.match(r"([A-Za-z_]\w*)=(.*)$", body)
        try:
            if assignment:
                env[assignment.group(1)] = " ".join(shlex.split(assignment.group(2)))
            elif body:
                commands.append([expand(t, env) for t in shlex.split(body)])
        except ValueError:
            return None
    if len(commands) != 1:
        return None
    tokens, flags, i = commands[0], [], 1
    io = {("-x", "c++"), ("-o", "host.o")}
    while i < len(tokens):
        if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) in io:
            io.discard((tokens[i], tokens[i + 1]))
            i += 2
            continue
        if tokens[i] not in ("-c", "host.cpp"):
            flags.append(tokens[i])
        i += 1
    if io or tokens.count("host.cpp") != 1 or "-c" not in tokens:
        return None
    return [tokens[0]], flags
