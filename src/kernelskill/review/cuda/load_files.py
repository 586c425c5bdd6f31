"""The stand-in for `torch.utils.cpp_extension.load` (an extension from source files the candidate writes), in the
"run" and "build" modes of `inline`.

torch's own `load` builds with ninja in a folder whose build file names each source by its path. A candidate writes
its sources into its working folder, which is another fresh folder in the prebuild and in the review: ninja saw new
paths and built again, on the GPU's clock (CUDA-L1's L2/42 held an H100 59 s for it), and the prebuild, which does
not pause its time limit for torch's builds, had cut its own. So the sources (and the headers beside them, which they
may include by relative path) are copied into a folder of the candidate's build cache named by their contents and
the call's arguments, and torch's own `load` builds there: the same sources and flags give the same paths, and ninja
finds the prebuild's objects up to date. Everything else is torch's: its signature (a call it refuses raises the
same TypeError), its compiler, its errors. A call this cannot copy (two sources of one name, a source it cannot
read) goes to torch's `load` unchanged.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import time
from pathlib import Path

from kernelskill.review.cuda import cache

HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc")
MAX_HEADERS, MAX_HEADER_BYTES = 64, 1 << 20  # what is copied from a source's folder besides the sources


def _capture():
    import torch.utils.cpp_extension as cpp_extension

    fn = cpp_extension.load
    assert fn.__module__ == "torch.utils.cpp_extension", f"load was replaced before {__name__} was imported"
    return fn


_TORCH_LOAD = _capture()


def stand_in(mode: str, arch: str | None = None):
    """A function that takes exactly torch's `load` arguments and builds as the module's text says; in "build"
    mode (a prebuild) the time limit is paused while it builds and what it returns refuses to run."""

    def load(*args, **kwargs):
        bound = inspect.signature(_TORCH_LOAD).bind(*args, **kwargs)
        bound.apply_defaults()
        return _load(mode, bound)

    load.__doc__ = f"torch.utils.cpp_extension.load, building in a folder named by its sources ({mode!r} mode)."
    load.mode = mode  # type: ignore[attr-defined]
    return load


def copied_sources(sources: list[str]) -> dict[str, bytes] | None:
    """{file name: bytes} of the sources and the headers in their folders; None when they cannot be copied as one
    folder (two files of one name, a source that cannot be read)."""
    files: dict[str, bytes] = {}
    try:
        for source in sources:
            path = Path(source)
            if path.name in files:
                return None
            files[path.name] = path.read_bytes()
        folders = dict.fromkeys(Path(s).resolve().parent for s in sources)
        headers = 0
        for folder in folders:
            for entry in sorted(folder.iterdir()):
                if (entry.suffix in HEADER_SUFFIXES and entry.is_file() and entry.name not in files
                        and entry.stat().st_size <= MAX_HEADER_BYTES and headers < MAX_HEADERS):
                    files[entry.name] = entry.read_bytes()
                    headers += 1
    except OSError:
        return None
    return files


def build_folder(name: str, files: dict[str, bytes], arguments: dict) -> Path:
    """The folder of this call's build, in the candidate's build cache, named by everything that changes it."""
    h = hashlib.sha256(f"torch-load\0{name}\0{sorted((k, repr(v)) for k, v in arguments.items())}".encode())
    for file_name, data in sorted(files.items()):
        h.update(f"\0{file_name}\0{len(data)}\0".encode())
        h.update(data)
    return cache.build_dir() / "torch-load" / h.hexdigest()[:24]


def _place(folder: Path, files: dict[str, bytes]) -> None:
    """Write the files into `folder` once: a file already there (the same bytes, by the folder's name) is left as
    it is, so ninja finds its objects newer than their sources."""
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, data in files.items():
        target = folder / file_name
        if target.exists():
            continue
        tmp = folder / f".{file_name}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, target)


def _load(mode: str, bound: inspect.BoundArguments):
    from kernelskill.review.cuda import inline
    from kernelskill.review.cuda.build import BuiltExtension

    a = bound.arguments
    name = str(a["name"])
    sources = [a["sources"]] if isinstance(a["sources"], (str, os.PathLike)) else list(a["sources"] or [])
    files = copied_sources([str(s) for s in sources])
    note = "built by torch's own load"
    if files is not None and sources:
        flags = {k: v for k, v in a.items() if k not in ("sources", "build_directory", "verbose")}
        folder = build_folder(name, files, flags)
        _place(folder, files)
        a["sources"] = [str(folder / Path(str(s)).name) for s in sources]
        a["build_directory"] = str(folder)
        note += f", in {folder} (its sources copied there: the same folder in the prebuild and the review)"
    else:
        folder = None
        note += ", as called (its sources could not be copied into one folder)"
    start = time.perf_counter()
    if mode == "build":
        with inline.alarm_paused():
            _TORCH_LOAD(*bound.args, **bound.kwargs)
        module = inline.NotRunnable(name)
    else:
        module = _TORCH_LOAD(*bound.args, **bound.kwargs)
    seconds = round(time.perf_counter() - start, 3)
    inline.BUILDS.append(BuiltExtension(name, name, "", folder, False, seconds, {"torch": seconds}, "", [], [note],
                                        None, "torch"))
    return module
