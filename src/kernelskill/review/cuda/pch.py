"""The precompiled `<torch/extension.h>`: built once per flag set (about 30 s, 700 MB), then every C++ unit with the
same flags is compiled against it in a few seconds.

`prepare_pch` builds it ahead of time (optimize and bench start it in the background); a build that finds it missing
builds it itself when no other process is doing so, and otherwise compiles without it rather than wait. gcc's `-H`
output says whether the header was used; `-Winvalid-pch` says why not.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

from kernelskill.review.cuda import CudaCompileError, cache, toolchain
from kernelskill.review.cuda.cache import flock, touch
from kernelskill.review.cuda.plan import plan_build
from kernelskill.review.cuda.toolchain import Runner, command_line
from kernelskill.review.logs import compiler_errors, trim_log

PCH_HEADER = "ks_torch_extension.h"
_HEADER_TREE = re.compile(r"^(\.+|!|x) \S")


def pch_dir(pch_flags: list[str]) -> Path:
    return cache.build_dir() / "pch" / toolchain.digest("pch", toolchain.fingerprint(False), pch_flags)[:24]


def _ready(directory: Path) -> bool:
    return (directory / "pch.json").is_file() and (directory / f"{PCH_HEADER}.gch").is_file()


def _build(directory: Path, pch_flags: list[str], runner: Runner) -> tuple[bool, float, str]:
    """Compile <torch/extension.h> once for these flags. Caller holds the PCH lock. Returns (ok, seconds, log)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / PCH_HEADER).write_text("#include <torch/extension.h>\n")
    tmp = f"{PCH_HEADER}.gch.{os.getpid()}.tmp"
    argv = [*toolchain.cxx(), *pch_flags, "-x", "c++-header", PCH_HEADER, "-o", tmp]
    code, out, seconds = runner.run(argv, directory)
    log = f"{command_line(argv)}\n{out}"
    if code != 0:
        with contextlib.suppress(FileNotFoundError):
            (directory / tmp).unlink()
        return False, seconds, log
    os.replace(directory / tmp, directory / f"{PCH_HEADER}.gch")
    (directory / "pch.json").write_text(json.dumps({"argv": argv, "seconds": round(seconds, 2)}))
    return True, seconds, log


def prepare_pch(extra_cflags: list[str] | None = None, extra_include_paths: list[str] | None = None,
                with_cuda: bool | None = None) -> float:
    """Build the precompiled header that later builds with these flags will use; waits if another process is
    building it. Returns the seconds spent building (0.0 when it was already there). Call it in the background at
    the start of a run, once per flag set in use (most candidates pass no extra_cflags, some pass ["-O3"])."""
    import torch

    if with_cuda is None:
        with_cuda = torch.version.cuda is not None and toolchain.cuda_home() is not None
    plan = plan_build("prepare_pch", "", None, None, extra_cflags, with_cuda=with_cuda,
                      extra_include_paths=extra_include_paths)
    directory = pch_dir(plan.pch_flags)
    if _ready(directory):
        touch(directory / "pch.json")
        return 0.0
    with flock(cache.pch_lock(directory.name)):
        if _ready(directory):
            return 0.0
        ok, seconds, log = _build(directory, plan.pch_flags, Runner())
        if not ok:
            raise CudaCompileError("building the precompiled <torch/extension.h> failed:\n" + compiler_errors(log),
                                   trim_log(log))
        return seconds


def header_flags(pch_flags: list[str], runner: Runner, notes: list[str]) -> tuple[list[str], float, str]:
    """The flags that compile a C++ unit against the precompiled header for `pch_flags`, building the header first
    when nobody else is building it; no flags (and a note why) when it is not ready. Returns (flags, seconds spent
    building the header, its build log: empty when this call did not build it)."""
    directory = pch_dir(pch_flags)
    seconds, log = 0.0, ""
    if not _ready(directory):
        with flock(cache.pch_lock(directory.name), blocking=False) as mine:
            if mine and not _ready(directory):
                ok, seconds, log = _build(directory, pch_flags, runner)
                if not ok:  # the unit's own compile, next, shows the error if the headers are at fault
                    notes.append("building the precompiled header failed: compiled without it")
            elif not mine:
                notes.append("the precompiled header was being built by another process: compiled without it")
    if not _ready(directory):
        return [], seconds, log
    touch(directory / "pch.json")
    return ["-Winvalid-pch", "-H", "-include", str(directory / PCH_HEADER)], seconds, log


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
