"""Folders the user names on the command line (--log-dir): made when missing, proven writable before any work.

A review that finds out at the end that its log folder is a file, or on a read-only disk, would fail with an
OSError traceback after the candidate already ran; checking first gives one message that says what to change.
Writability is proven by writing (a probe file), not by os.access: root passes every permission check and still
cannot write a read-only file system.
"""

from __future__ import annotations

import os
import tempfile
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
