"""Finding and ending a process tree, and saying how a process ended: shared by the sandbox and the zygote's
harness side."""

from __future__ import annotations

import os
import signal


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


def kill_tree(pid: int) -> None:
    """SIGKILL a process, its process group and every descendant with their groups. The tree is stopped first, so
    nothing in it starts another process while it is being walked, and the worker's death orphans nobody unseen."""
    signal_all(stop_tree(pid), signal.SIGKILL)


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
