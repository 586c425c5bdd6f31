"""Starting confined processes: the zygote of each sandbox environment (zygote.py), kept while it serves, and
`run_confined` for a one-off child (a problem probe, `kernelskill doctor`'s probe) confined as a review worker is."""

from __future__ import annotations

import atexit
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from kernelskill.review import confine
from kernelskill.review.processes import kill_tree
from kernelskill.review.zygote import MAX_ZYGOTES, Zygote

_ZYGOTES: dict[tuple, Zygote] = {}
_ZYGOTES_LOCK = threading.Lock()


def zygote_for(env: dict[str, str]) -> Zygote:
    """The running zygote of this environment, started (or started again, when it died) on first use. Past
    MAX_ZYGOTES, the least recently used ones with no child alive are stopped (each holds torch in memory)."""
    key = tuple(sorted(env.items()))
    stale: list[Zygote] = []
    with _ZYGOTES_LOCK:
        zygote = _ZYGOTES.pop(key, None)
        if zygote is None or not zygote.alive():
            if zygote is not None:
                stale.append(zygote)
            scratch = Path(tempfile.mkdtemp(prefix="kernelskill-zygote-"))
            zygote = Zygote(env, scratch)
        _ZYGOTES[key] = zygote  # last: the most recently used
        for other_key, other in list(_ZYGOTES.items())[:-1]:
            if len(_ZYGOTES) <= MAX_ZYGOTES:
                break
            if not other.children():
                stale.append(_ZYGOTES.pop(other_key))
    for old in stale:
        old.close()
        shutil.rmtree(old.log.parent, ignore_errors=True)
    return zygote


def run_confined(module: str, args: list[str], env: dict[str, str], timeout: float,
                 max_output: int = 4 << 20) -> tuple[int | None, str]:
    """Run module `module` with `args` as a child of the zygote of `env` (a sandbox environment from
    `clean_environment`), confined as a review worker is: a fresh scratch folder as its working directory, HOME and
    TMPDIR, removed after. Returns (its exit status, None when it ran past `timeout` and was killed; its stdout and
    stderr together, the first `max_output` bytes). Raises ZygoteError when it could not be started."""
    child_env, scratch = confine.scratch_environment(env)
    confine.protect_harness(env)
    stdin_r, stdin_w = os.pipe()
    result_r, result_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        child = zygote_for(env).spawn(module, args, child_env, str(scratch), stdin_r, out_w, result_w)
    except BaseException:
        for fd in (stdin_w, result_r, out_r):
            os.close(fd)
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    finally:
        for fd in (stdin_r, out_w, result_w):
            os.close(fd)
    os.close(stdin_w)
    os.close(result_r)
    output, deadline, code = bytearray(), time.monotonic() + timeout, None
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([out_r], [], [], min(remaining, 0.5))
            if not ready:
                continue
            chunk = os.read(out_r, 1 << 16)
            if not chunk:  # every process of its namespace has closed it: it is done
                break
            output += chunk[:max(0, max_output - len(output))]
        else:
            if child.poll() is None:  # (a pid the zygote reaped may soon be another process's)
                kill_tree(child.pid)
        try:
            code = child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            if child.poll() is None:
                kill_tree(child.pid)
        if time.monotonic() >= deadline:
            code = None
    finally:
        os.close(out_r)
        shutil.rmtree(scratch, ignore_errors=True)
    return code, output.decode(errors="replace")


def _close_zygotes() -> None:
    with _ZYGOTES_LOCK:
        zygotes = list(_ZYGOTES.values())
        _ZYGOTES.clear()
    for zygote in zygotes:
        zygote.close()
        shutil.rmtree(zygote.log.parent, ignore_errors=True)


# registered before the sandbox's pool (this module is imported first), so it runs after the pool killed its workers
atexit.register(_close_zygotes)
