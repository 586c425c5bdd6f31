"""Compile-checking CUDA candidates where no GPU can run them (CPU mode, CI).

A `load_inline` candidate is executed with `load_inline` replaced by `checking_load_inline`, which builds the same
two translation units torch would (the CUDA sources with nvcc, the C++ sources with the host compiler, syntax only)
and reports the real compiler errors, then returns a module whose functions refuse to run. Results are cached by
content, so a source checked once is not compiled again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Shared with the builder (cuda_build); callers that catch CudaCompileError from this module keep working.
from kernelskill.review import build_cache
from kernelskill.review.cuda_build import CudaCompileError, _bindings, _join
from kernelskill.review.logs import filter_header_warnings, trim_log


def cache_dir() -> Path:
    return build_cache.check_dir()


class NotRunnable:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        def refuse(*args, **kwargs):
            raise RuntimeError(f"extension {self._name!r} was compile-checked only: CUDA code does not run on CPU")

        return refuse


def _run(cmd: list[str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def check_sources(name: str, cpp_sources="", cuda_sources="", functions=None, extra_cflags=None,
                  extra_cuda_cflags=None, extra_include_paths=None) -> dict:
    """Compile the two translation units load_inline would build. Returns {"ok", "log", "warnings", "seconds"}."""
    from torch.utils.cpp_extension import include_paths

    from kernelskill.review.cuda_build import _MISSING_DECLARATION, _diagnostics, cuda_home, cuda_variants

    cpp = "#include <torch/extension.h>\n" + _join(cpp_sources) + _bindings(functions)
    has_cuda = bool(_join(cuda_sources).strip())
    # the CUDA units the GPU builder tries, fewest torch headers first; the last is what torch compiles
    units = [text for _, text in cuda_variants(cuda_sources)] if has_cuda else []
    cu = units[0] if units else ""
    includes = [*include_paths(), sysconfig.get_paths()["include"], *(extra_include_paths or [])]
    if has_cuda and cuda_home():  # as torch does for the C++ unit of a CUDA extension (c10/cuda headers need it)
        includes.append(str(Path(cuda_home()) / "include"))
    inc_flags = [f"-I{p}" for p in includes]
    defines = [f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    key = hashlib.sha256(json.dumps([cpp, units, extra_cflags, extra_cuda_cflags, includes]).encode()).hexdigest()[:24]
    cached = cache_dir() / f"{key}.json"
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(cached.read_text())
        build_cache.touch(cached)  # used now: pruning removes the least recently used first
        return {**found, "cached": True}

    nvcc = shutil.which("nvcc")
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kernelskill-cuda-") as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "main.cpp").write_text(cpp)
        jobs = []
        if _join(cuda_sources).strip():
            if nvcc is None:
                raise CudaCompileError("nvcc is not on PATH: install the CUDA toolkit to check CUDA candidates", "")
            (tmp_path / "cuda.cu").write_text(cu)
            jobs.append([nvcc, "-c", "cuda.cu", "-o", "cuda.o", "-std=c++17", "-arch=sm_90", "--expt-relaxed-constexpr",
                         *defines, *inc_flags, *(extra_cuda_cflags or [])])
        if cxx is None:
            raise CudaCompileError("no C++ compiler found (set CXX or install g++)", "")
        jobs.append([cxx, "-fsyntax-only", "-std=c++17", "main.cpp", *defines, *inc_flags, *(extra_cflags or [])])
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda cmd: _run(cmd, tmp_path), jobs))
        for text in units[1:]:  # as the builder does: a missing declaration moves on to more of torch's headers
            code, out = results[0]
            if code == 0 or not _MISSING_DECLARATION.search(_diagnostics(out)):
                break
            (tmp_path / "cuda.cu").write_text(text)
            results[0] = _run(jobs[0], tmp_path)
    log = "\n".join(f"$ {' '.join(cmd[:3])} ...\n{out}" for cmd, (_, out) in zip(jobs, results))
    ok = all(code == 0 for code, _ in results)
    outcome = {
        "ok": ok,
        "log": log,
        "warnings": filter_header_warnings(log, ("main.cpp", "cuda.cu")),
        "seconds": round(time.perf_counter() - start, 2),
    }
    build_cache.write_atomic(cached, json.dumps(outcome))
    return {**outcome, "cached": False}


def checking_load_inline(name, cpp_sources="", cuda_sources=None, functions=None, extra_cflags=None,
                         extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, **_ignored):
    """Stands in for torch.utils.cpp_extension.load_inline on machines that cannot run CUDA."""
    outcome = check_sources(name, cpp_sources, cuda_sources or "", functions, extra_cflags, extra_cuda_cflags,
                            extra_include_paths)
    checking_load_inline.calls.append({"name": name, **{k: outcome[k] for k in ("ok", "seconds", "cached", "warnings")}})
    if not outcome["ok"]:
        errors = [line for line in outcome["log"].splitlines() if "error" in line.lower()]
        raise CudaCompileError(
            f"extension {name!r} failed to compile: " + (errors[0].strip() if errors else "see the log"),
            trim_log(outcome["log"]),
        )
    return NotRunnable(name)


checking_load_inline.calls = []
