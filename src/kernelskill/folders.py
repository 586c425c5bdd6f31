"""Where kernelskill writes: folders the user names, and files written whole.

`writable_folder`: a folder named on the command line (--log-dir), made when missing and proven writable before
any work. A review that finds out at the end that its log folder is a file, or on a read-only disk, would fail
with an OSError traceback after the candidate already ran; checking first gives one message that says what to change.
Writability is proven by writing (a probe file), not by os.access: root passes every permission check and still
cannot write a read-only file system.

`write_atomically`: every file the run store, `optimize` and `bench` write (kernels, best.py, summary.json,
results.json, transcripts, logs brought back from a cluster) goes through a temporary file and a rename, so a
reader, or a run killed half-way, never sees half a file.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from kernelskill.errors import KernelSkillError


def writable_folder(path: Path, option: str) -> Path:
    """`path` as a folder this process can write, made if missing; else a KernelSkillError naming `option`."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise KernelSkillError(f"{option} {path} is a file, not a folder: name a folder (it is made if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".kernelskill-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise KernelSkillError(f"{option} {path} cannot be written ({exc.strerror or exc}): name a folder you can "
                               "write") from None
    return path


def write_atomically(path: Path, data: str | bytes) -> Path:
    """Write `data` (text as UTF-8) to a temporary file next to `path`, then rename it over `path`; return `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
