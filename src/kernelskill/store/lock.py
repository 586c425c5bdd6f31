"""One writer per run folder: `optimize` and `bench` hold DIR/run.lock (an flock) while they write DIR.

SQLite alone would let two `--resume` runs of one folder both go ahead: each redoes the same rounds and the folder
ends with duplicate rounds and two different bests. The lock is an flock on a file in the run folder, so the kernel
releases it when the holder dies (a kill or a crash never leaves a folder locked), and it names the holder's PID.
Readers (`kernelskill report`, RunStore.open in tests) take no lock: WAL lets them read while a run writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernelskill.errors import KernelSkillError
from kernelskill.store.db import make_run_folder

LOCK_NAME = "run.lock"


@contextmanager
def hold_run_folder(run_dir: Path, *, create: bool, command: str) -> Iterator[Path]:
    """Hold the run folder's lock for the `with` block. `create` makes the folder first (a new run); without it a
    missing folder is left for RunStore.open to report (a mistyped --out is not created by --resume). `command`
    ("optimize", "bench") is written next to the PID for whoever finds the folder busy (not the whole command
    line: it may hold a --base-url with credentials)."""
    run_dir = Path(run_dir)
    if create:
        make_run_folder(run_dir)
    elif not run_dir.is_dir():
        yield run_dir
        return
    try:
        import fcntl
    except ImportError:  # not POSIX: no flock; runs are not guarded against a second writer
        yield run_dir
        return
    path = run_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise KernelSkillError(f"cannot write the run folder {run_dir} ({LOCK_NAME}: {exc.strerror or exc}): "
                               "choose a folder you can write with --out") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise KernelSkillError(_busy_message(run_dir, _holder(fd))) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} kernelskill {command}\n".encode())
        yield run_dir
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        return ""
    return text


def _busy_message(run_dir: Path, holder: str) -> str:
    pid, _, command = holder.partition(" ")
    who = f"process {pid}" if pid.isdigit() else "another process"
    what = f" ({command.strip()})" if command.strip() else ""
    return (f"the run folder {run_dir} is in use by {who}{what}: wait for it to finish or stop it "
            f"(kill {pid if pid.isdigit() else 'PID'}), or choose another --out")
