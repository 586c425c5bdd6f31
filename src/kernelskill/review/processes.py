"""Finding and ending a process tree, and saying how a process ended: shared by the sandbox and the zygote's
harness side."""

from __future__ import annotations

import os
import signal
import time


def _children() -> dict[int, list[int]]:
    """ppid -> pids, from /proc (empty where there is none)."""
    tree: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return tree
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def threads(pid: int) -> list[int]:
    """The thread ids of `pid` (none for a process that is gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    tree, found, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def signal_all(pids, sig: int) -> None:
    """Send `sig` to each process and to its process group; gone or foreign ones are skipped."""
    for p in pids:
        for send in (lambda: os.killpg(p, sig), lambda: os.kill(p, sig)):
            try:
                send()
            except (ProcessLookupError, PermissionError):
                pass


def stop_tree(pid: int) -> list[int]:
    """SIGSTOP a process, its process group and every descendant with their groups; the pids stopped, `pid` first.
    The tree is walked again until no new descendant appears (a stopped process starts no other), so compilers that
    started sessions of their own are found through their parent links."""
    signal_all([pid], signal.SIGSTOP)
    seen: list[int] = []
    for _ in range(5):  # until no new descendant appears
        new = [p for p in descendants(pid) if p not in seen]
        if not new:
            break
        signal_all(new, signal.SIGSTOP)
        seen += new
    return [pid, *seen]


def kill_tree(pid: int, wait: float = 0.0) -> list[int]:
    """SIGKILL a process, its process group and every descendant with their groups. The tree is stopped first, so
    nothing in it starts another process while it is being walked, and the worker's death orphans nobody unseen.

    With `wait`, return only once every one of them has ended (or `wait` seconds passed): killed together, a runner's
    small parents (the zygote's holder, its PID namespace's pid 1) are reaped while the runner itself still gives back
    what it held, and on a GPU that took seconds for tens of GB, in which the next runner ran out of memory (CUDA-L1's
    L2/34 on the H100: the reference's batch, right after the candidate's runner was killed). Returns those left."""
    pids = stop_tree(pid)
    born = {p: _started(p) for p in pids}
    signal_all(pids, signal.SIGKILL)
    return until_gone(born, wait) if wait else []


def _stat(pid: int) -> list[bytes] | None:
    """/proc/PID/stat's fields after the command name (state first), None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 else None


def _started(pid: int) -> bytes | None:
    """A process's start time (clock ticks after boot): with its pid, who it is (a pid is soon another's)."""
    fields = _stat(pid)
    return fields[19] if fields else None


def _running(pid: int, started: bytes | None) -> bool:
    """Whether this process still runs: a zombie holds no memory, no files and no device context any more."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in (b"Z", b"X") and (started is None or fields[19] == started)


def until_gone(born: dict[int, bytes | None], seconds: float) -> list[int]:
    """Wait until none of these processes (pid -> start time) runs, at most `seconds`; the pids still running."""
    deadline = time.monotonic() + seconds
    left = [p for p, started in born.items() if _running(p, started)]
    while left and time.monotonic() < deadline:
        time.sleep(0.005)
        left = [p for p in left if _running(p, born[p])]
    return left


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "the worker did not exit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the worker process died with {name}"
    return f"the worker process exited with code {returncode} before reporting a result"


def named(name: str) -> list[int]:
    """The processes whose name (/proc/<pid>/comm) is `name`: how a check finds a process that gave itself one."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == name:
                    found.append(int(pid))
        except OSError:
            pass
    return found
