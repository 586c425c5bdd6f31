"""The precompiled headers: `<torch/extension.h>`, built once per flag set (about 30 s, 700 MB), then every C++ unit
with the same flags is compiled against it in a few seconds; the bindings' headers (plan.BINDINGS_HEADER) for a C++
unit that only declares functions; and the split host parts' headers (plan.SPLIT_HOST_HEADERS), each built with the
exact host flags nvcc would use for the candidate's CUDA flags.

Who builds them: `prepare_pch`, in the harness (optimize and bench start `reviewer.prepare_builds` in the background,
for the flag sets candidates use most), into the folder its sandboxed runners read (`cache.headers_dir`). A runner
never builds one: every later build of every candidate includes it, so a header a candidate's process made could
carry that candidate's code into all of them. A runner that finds one missing waits while the harness is building
it, and otherwise compiles without it (slower; a note says so). Outside a sandbox (the harness's own builds, tests
of the builder) a build that finds one missing builds it when no other process is doing so. gcc's `-H` output says
whether the header was used; `-Winvalid-pch` says why not. A CUDA extension's C++ unit shares the header of C++-only
ones when the toolkit's include folder does not change what the header reads (`header_flags_for`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from pathlib import Path

from kernelskill.review.caches import ensure_headers_root
from kernelskill.review.cuda import CudaCompileError, cache, toolchain
from kernelskill.review.cuda.cache import flock, touch
from kernelskill.review.cuda.plan import BINDINGS_HEADER, SPLIT_HOST_HEADERS, plan_build
from kernelskill.review.cuda.toolchain import Runner, command_line
from kernelskill.review.logs import compiler_errors, trim_log

PCH_HEADER = "ks_torch_extension.h"
BINDINGS = "ks_bindings.h"
_HEADER_TREE = re.compile(r"^(\.+|!|x) \S")


def header_flags_for(pch_flags: list[str], root: Path | None = None) -> list[str]:
    """The flags the header for a unit compiled with `pch_flags` is built with: `pch_flags` without the CUDA
    toolkit's include folder when <torch/extension.h> reads the same without it (then the C++ units of CUDA and of
    C++-only extensions share one header, a minute less per cache; gcc takes a header whose include folders differ).
    Whether it does is found out once per flag set and kept beside the headers."""
    toolkit = [p for p in toolchain.system_includes(True) if p not in toolchain.system_includes(False)]
    without, i = [], 0
    while i < len(pch_flags):
        if pch_flags[i] == "-isystem" and i + 1 < len(pch_flags) and pch_flags[i + 1] in toolkit:
            i += 2
            continue
        without.append(pch_flags[i])
        i += 1
    if without == pch_flags:
        return pch_flags
    writer, root = root, root or cache.headers_dir()
    record = root / f"same-{toolchain.digest('same', toolchain.fingerprint(False), pch_flags)[:24]}.json"
    try:
        return without if json.loads(record.read_text())["same"] else pch_flags
    except (OSError, ValueError, KeyError, TypeError):
        if writer is None and cache.headers_read_only():  # a runner: the harness did not record it, so no sharing
            return pch_flags
    read = _preprocessed(pch_flags)
    same = read is not None and read == _preprocessed(without)
    with contextlib.suppress(OSError):
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"same": same, "flags": pch_flags, "without": without}))
        os.replace(tmp, record)
    return without if same else pch_flags


def _preprocessed(flags: list[str]) -> str | None:
    """The digest of <torch/extension.h> as the preprocessor reads it with `flags` (no line markers); None if it fails."""
    import hashlib
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / PCH_HEADER).write_text("#include <torch/extension.h>\n")
        proc = subprocess.run([*toolchain.cxx(), *flags, "-E", "-P", "-x", "c++-header", PCH_HEADER], cwd=folder,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return hashlib.sha256(proc.stdout).hexdigest() if proc.returncode == 0 else None


def pch_dir(pch_flags: list[str], root: Path | None = None) -> Path:
    return (root or cache.headers_dir()) / toolchain.digest("pch", toolchain.fingerprint(False), pch_flags)[:24]


def _ready(directory: Path, header: str = PCH_HEADER) -> bool:
    return (directory / "pch.json").is_file() and (directory / f"{header}.gch").is_file()


def _build(directory: Path, pch_flags: list[str], runner: Runner, header: str = PCH_HEADER,
           text: str = "#include <torch/extension.h>\n", compiler: list[str] | None = None) -> tuple[bool, float, str]:
    """Compile `text` as `header` once for these flags. Caller holds the PCH lock. Returns (ok, seconds, log)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / header).write_text(text)
    tmp = f"{header}.gch.{os.getpid()}.tmp"
    argv = [*(compiler or toolchain.cxx()), *pch_flags, "-x", "c++-header", header, "-o", tmp]
    code, out, seconds = runner.run(argv, directory)
    log = f"{command_line(argv)}\n{out}"
    if code != 0:
        with contextlib.suppress(FileNotFoundError):
            (directory / tmp).unlink()
        return False, seconds, log
    os.replace(directory / tmp, directory / f"{header}.gch")
    (directory / "pch.json").write_text(json.dumps({"argv": argv, "seconds": round(seconds, 2)}))
    return True, seconds, log


# The flag sets candidates use most (an extension's extra_cflags, and extra_cuda_cflags for the split host parts):
# `reviewer.prepare_builds` has the harness build the headers of each before the first candidate needs them.
COMMON_CFLAGS: tuple[tuple[str, ...], ...] = ((), ("-O3",))
COMMON_CUDA_CFLAGS: tuple[tuple[str, ...], ...] = ((), ("-O3",))


def prepare_pch(extra_cflags: list[str] | None = None, extra_include_paths: list[str] | None = None,
                with_cuda: bool | None = None, arch: str | None = None, extra_cuda_cflags: list[str] | None = None,
                root: Path | None = None) -> float:
    """Build the precompiled headers that later builds with these flags will use: <torch/extension.h>, the bindings
    header and, with CUDA and a known `arch`, the split host parts' headers; waits where another process is
    building one. `root`: the folder to build them in (the harness's for its runners, caches.headers_root; default
    this process's own). Returns the seconds spent building (0.0 when all were there). Only a failure of the first
    is raised: builds go without the others (a note says so), only slower."""
    import torch

    if with_cuda is None:
        with_cuda = torch.version.cuda is not None and toolchain.cuda_home() is not None
    if root is None and cache.headers_read_only():
        raise CudaCompileError("a sandboxed runner never builds the precompiled headers (the harness does)", "")
    root = root or ensure_headers_root()
    cuda = _PROBE_CUDA if with_cuda and arch and toolchain.cuda_home() else None
    plan = plan_build("prepare_pch", "torch::Tensor f(torch::Tensor x);", cuda, ["f"], extra_cflags,
                      extra_cuda_cflags, with_cuda=with_cuda, extra_include_paths=extra_include_paths, arch=arch)
    flags = header_flags_for(plan.pch_flags, root)
    directory = pch_dir(flags, root)
    seconds = 0.0
    if _ready(directory):
        touch(directory / "pch.json")
    else:
        with flock(cache.pch_lock(directory.name, root)):
            if not _ready(directory):
                ok, seconds, log = _build(directory, flags, Runner())
                if not ok:
                    raise CudaCompileError("building the precompiled <torch/extension.h> failed:\n"
                                           + compiler_errors(log), trim_log(log))
    notes: list[str] = []
    seconds += header_flags(plan.pch_flags, Runner(), notes, bindings=True, wait=True, root=root)[1]
    split = next((u for u in plan.cuda if u.host_text), None)  # every split variant has the same host flags
    host = toolchain.host_command(split.argv) if split else None
    if host is not None:
        compiler, flags = host
        for header in SPLIT_HOST_HEADERS.values():
            seconds += split_header_flags(compiler, flags, header, Runner(), notes, wait=True, root=root)[1]
    return seconds


# A CUDA source of the usual shape (a kernel, a torch wrapper that launches it), for the split headers' flags.
_PROBE_CUDA = """__global__ void k(float* x) { x[0] = 1; }
torch::Tensor f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }
"""


def _header(directory: Path, header: str, build, runner_note: str, notes: list[str], wait: bool,
            root: Path | None) -> tuple[float, str]:
    """Make sure `directory` holds `header`: built here by `build()` (-> (ok, seconds, log)) when this process may
    build headers and nobody else is building it; a sandboxed runner (which never may) waits while the harness
    holds the header's lock. Returns (seconds spent building, its log: empty when this call did not build it)."""
    if _ready(directory, header):
        return 0.0, ""
    lock = cache.pch_lock(directory.name, root)
    if root is None and cache.headers_read_only():
        with contextlib.suppress(OSError):  # the harness's lock, opened for reading: held while it builds
            fd = os.open(lock, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            finally:
                os.close(fd)
        if not _ready(directory, header):
            notes.append(f"the {runner_note} is not built yet (the harness builds it: `kernelskill optimize` and "
                         "`bench` start that): compiled without it")
        return 0.0, ""
    seconds, log = 0.0, ""
    if root is None:
        ensure_headers_root()
    else:
        root.mkdir(parents=True, exist_ok=True)
    with flock(lock, blocking=wait) as mine:
        if mine and not _ready(directory, header):
            ok, seconds, log = build()
            if not ok:  # the unit's own compile, next, shows the error if the headers are at fault
                notes.append(f"building the {runner_note} failed: compiled without it")
        elif not mine:
            notes.append(f"the {runner_note} was being built by another process: compiled without it")
    return seconds, log


def header_flags(pch_flags: list[str], runner: Runner, notes: list[str], bindings: bool = False,
                 wait: bool = False, root: Path | None = None) -> tuple[list[str], float, str]:
    """The flags that compile a C++ unit against the precompiled header for `pch_flags` (<torch/extension.h>, or
    BINDINGS_HEADER for the narrowed bindings unit); no flags (and a note why) when it is not ready (see `_header`:
    who builds it, who waits). Returns (flags, seconds spent building the header, its build log: empty when this
    call did not build it)."""
    pch_flags = header_flags_for(pch_flags, root)  # (the bindings' headers are a part of <torch/extension.h>)
    if bindings:
        header, text = BINDINGS, BINDINGS_HEADER
        directory = (root or cache.headers_dir()) / ("bindings-" + toolchain.digest(
            "bindings-pch", toolchain.fingerprint(False), pch_flags, BINDINGS_HEADER)[:24])
    else:
        header, text = PCH_HEADER, "#include <torch/extension.h>\n"
        directory = pch_dir(pch_flags, root)
    seconds, log = _header(directory, header, lambda: _build(directory, pch_flags, runner, header, text),
                           "precompiled header", notes, wait, root)
    if not _ready(directory, header):
        return [], seconds, log
    touch(directory / "pch.json")
    return ["-Winvalid-pch", "-H", "-include", str(directory / header)], seconds, log


SPLIT_HEADER = "ks_split_host.h"


def split_dir(compiler: list[str], flags: list[str], header: str, root: Path | None = None) -> Path:
    return (root or cache.headers_dir()) / ("split-" + toolchain.digest("split-pch", toolchain.fingerprint(True),
                                                                        compiler, flags, header)[:24])


def split_header_flags(compiler: list[str], flags: list[str], header: str, runner: Runner, notes: list[str],
                       wait: bool = False, root: Path | None = None) -> tuple[list[str], float, str]:
    """The flags that compile a split CUDA source's host part (`split.py`) against `header` (one of
    plan.SPLIT_HOST_HEADERS) precompiled with exactly the host compiler's `flags` (gcc takes no header built with
    other flags); who builds it and who waits: `_header`. Returns (flags, seconds spent building the header, its
    build log); no flags when the header is not ready."""
    directory = split_dir(compiler, flags, header, root)
    seconds, log = _header(directory, SPLIT_HEADER,
                           lambda: _build(directory, flags, runner, SPLIT_HEADER, header, compiler),
                           "split host part's precompiled header", notes, wait, root)
    if not _ready(directory, SPLIT_HEADER):
        return [], seconds, log  # the caller includes the header's text instead
    touch(directory / "pch.json")
    return ["-Winvalid-pch", "-H", "-include", str(directory / SPLIT_HEADER)], seconds, log


def clean_header_tree(out: str) -> tuple[str, bool | None]:
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
