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
from dataclasses import dataclass
from pathlib import Path

from kernelskill.review import caches, confine
from kernelskill.review.processes import kill_tree
from kernelskill.review.zygote import MAX_ZYGOTES, Zygote

_ZYGOTES: dict[tuple, Zygote] = {}
# read by children only, never by a module as it is imported: the spec, and the caches (the reference runner's
# differ from the candidate's, and one zygote serves both)
KEYLESS = {confine.SPEC_VAR, *confine.CACHE_VARS, caches.OWNER_VAR, caches.HEADERS_VAR}
_ZYGOTES_LOCK = threading.Lock()


def zygote_key(env: dict[str, str]) -> tuple:
    """What keeps zygotes apart: the variables the modules a zygote preloads may read as they are imported (those on
    the sandbox's allowlist: torch's, Triton's, CUDA's, OpenMP's, Python's, the toolchain's), less KEYLESS, which
    only the children read. A child is handed its whole environment anyway; a variable a caller adds
    for the child alone needs no zygote of its own, and a zygote costs seconds of CPU to start (in the test suite,
    each sandbox probe's own variables started one)."""
    return tuple(sorted((k, v) for k, v in env.items()
                        if k not in KEYLESS and confine.allowed_variable(k, v)))


def zygote_for(env: dict[str, str], reserve: bool = False) -> Zygote:
    """The running zygote of this environment, started (or started again, when it died) on first use. Past
    MAX_ZYGOTES, the least recently used ones with no child alive are stopped (each holds torch in memory).
    `reserve`: the caller spawns from it next, and until that spawn returns the zygote is not idle (another
    caller's eviction closed zygotes between the two on the H100: 72 of 100 problem probes of a bench failed)."""
    key = zygote_key(env)
    stale: list[Zygote] = []
    with _ZYGOTES_LOCK:
        zygote = _ZYGOTES.pop(key, None)
        if zygote is None or not zygote.alive():
            if zygote is not None:
                stale.append(zygote)
            scratch = Path(tempfile.mkdtemp(prefix="kernelskill-zygote-"))
            # started with just those variables (a child's /proc/self/environ is the zygote's, and shows no more) and
            # this caller's caches, for anything its own start compiles (never a candidate's code)
            zygote = Zygote({**dict(key), **{k: env[k] for k in confine.CACHE_VARS if k in env}}, scratch)
        _ZYGOTES[key] = zygote  # last: the most recently used
        if reserve:
            zygote.reserve()  # not idle until its spawn returns: no eviction below closes it
        for other_key, other in list(_ZYGOTES.items())[:-1]:
            if len(_ZYGOTES) <= MAX_ZYGOTES:
                break
            if not other.children():
                stale.append(_ZYGOTES.pop(other_key))
    for old in stale:
        old.close()
        shutil.rmtree(old.log.parent, ignore_errors=True)
    return zygote


@dataclass
class Confined:
    """How a one-off confined child ended: its exit status (None: killed at its time limit), what it printed (stdout
    and stderr together, the tail when there was more than the limit) and what it wrote to its result pipe (the
    head), each cut to the limit."""

    code: int | None
    output: bytes
    result: bytes


def run_confined(module: str, args: list[str], env: dict[str, str], timeout: float, stdin: bytes = b"",
                 max_output: int = 4 << 20) -> Confined:
    """Run module `module` as a child of the zygote of `env` (a sandbox environment from `clean_environment`),
    confined as a review worker is: a fresh scratch folder as its working directory, HOME and TMPDIR, removed after;
    `stdin` on its standard input; its result pipe's descriptor number in place of `zygote.RESULT_FD` in `args`.
    Whatever it started dies with it. Raises ZygoteError when it could not be started."""
    child_env, scratch = confine.scratch_environment(env)
    confine.protect_harness(env)
    stdin_r, stdin_w = os.pipe()
    result_r, result_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        child = zygote_for(env, reserve=True).spawn(module, args, child_env, str(scratch), stdin_r, out_w, result_w)
    except BaseException:
        for fd in (stdin_w, result_r, out_r):
            os.close(fd)
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    finally:
        for fd in (stdin_r, out_w, result_w):
            os.close(fd)
    threading.Thread(target=_feed, args=(stdin_w, stdin), daemon=True).start()
    output, result, deadline, code = bytearray(), bytearray(), time.monotonic() + timeout, None
    open_fds = [out_r, result_r]
    try:
        while open_fds and (remaining := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(open_fds, [], [], min(remaining, 0.5))
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:  # every process of its namespace has closed it
                    open_fds.remove(fd)
                elif fd == out_r:  # the tail of what it printed (the end is where a traceback is)
                    output += chunk
                    del output[:max(0, len(output) - max_output)]
                else:
                    result += chunk[:max(0, max_output - len(result))]
        if open_fds and child.poll() is None:  # (a pid the zygote reaped may soon be another process's)
            kill_tree(child.pid)
        try:
            code = child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            if child.poll() is None:
                kill_tree(child.pid)
        if open_fds:
            code = None
    finally:
        os.close(out_r)
        os.close(result_r)
        shutil.rmtree(scratch, ignore_errors=True)
    return Confined(code, bytes(output), bytes(result))


def _feed(fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError:  # it ended before reading it all: its exit says why
        pass


def _close_zygotes() -> None:
    with _ZYGOTES_LOCK:
        zygotes = list(_ZYGOTES.values())
        _ZYGOTES.clear()
    for zygote in zygotes:
        zygote.close()
        shutil.rmtree(zygote.log.parent, ignore_errors=True)


# registered before the sandbox's pool (this module is imported first), so it runs after the pool killed its workers
atexit.register(_close_zygotes)
