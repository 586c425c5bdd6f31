"""Starting confined processes in milliseconds: a fork server that has imported torch and never runs anything else.

Every review starts two fresh runners (the trust boundary), and starting Python and importing torch costs seconds a
process. The zygote pays it once per environment: it imports torch and the worker's modules, then forks a child per
request. It never runs problem or candidate code, never initialises CUDA (a forked CUDA context is unusable), and
is non-dumpable, so its children cannot read it through /proc.

    harness (sandbox.WorkerProcess) --request + fds--> zygote --fork--> holder --fork--> pid 1 of a PID namespace
                                    <--pid, exit code--                                  (private /proc and
                                                                                          /dev/shm, then
                                                                                          confine.apply, then the
                                                                                          module it was asked for)

The holder unshares a PID and a mount namespace and forks; its child is pid 1 there and mounts a /proc and a
/dev/shm of its own, so a process the candidate starts (double fork included) dies with it, no process outside is
visible, and no other runner's files in /dev/shm either. The holder only waits and exits with pid 1's status. A
layer that cannot be set up is reported to `confine.apply`, which fails the process closed unless the user turned
that layer off.

Requests arrive on a SOCK_SEQPACKET socket: one JSON message (module, args, env, cwd) with three descriptors
(stdin, the output both stdout and stderr go to, and the result pipe, whose number in the child replaces
`{result_fd}` in the arguments). The zygote answers with the pid,
and later with each child's exit status (as a negative signal number when it was killed, like subprocess).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from kernelskill.review import confine

MAX_REQUEST = 1 << 20  # a request's JSON (the environment is the bulk)
# Resource limits of every child (never raised above what the zygote has). Address space is not limited: the CUDA
# driver reserves tens of GB of virtual addresses for its unified memory, which RLIMIT_AS would refuse.
OPEN_FILES = 4096
FILE_BYTES = 16 << 30  # one file: a batch of outputs the judge reads is at most 2 GiB
MORE_PROCESSES = 4096  # processes and threads beyond those running (compilers, Inductor's workers, CUDA's threads)
RESULT_FD = "{result_fd}"  # in a request's arguments: the number of the descriptor the result pipe got in the child
START_TIMEOUT_S = 300.0  # importing torch on a loaded machine
MAX_ZYGOTES = 3  # environments kept ready at once (each holds torch in memory)


class ZygoteError(RuntimeError):
    """The zygote is gone or refused a request; the caller starts the process another way or reports it."""


# ------------------------------------------------------------------------------------------------ harness side
class Zygote:
    """A running zygote for one environment; `spawn` starts a child, `Child` watches it."""

    def __init__(self, env: dict[str, str], scratch: Path) -> None:
        from kernelskill.review.sandbox import _spawn

        self.env = env
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.log = scratch / "zygote.log"
        self._lock = threading.Lock()  # one request at a time: its answer is the next pid message
        self._answers: list[dict] = []
        self._exits: dict[int, int] = {}
        self._live: set[int] = set()  # children started and not yet seen to exit
        self.handed = 0  # callers given this zygote (confined.zygote_for) whose spawn has not returned yet
        self._changed = threading.Condition()
        try:
            with open(self.log, "ab") as log:
                # torch asks NVML, not the CUDA driver, whether a GPU is there: the driver must never start here
                zygote_env = {**env, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
                self.proc = _spawn([sys.executable, "-m", "kernelskill.review.zygote", str(theirs.fileno()),
                                    str(os.getpid())],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=zygote_env, cwd=str(scratch),
                                   pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        self._reader = threading.Thread(target=self._read, name="kernelskill-zygote", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(MAX_REQUEST)
            except OSError:
                data = b""
            with self._changed:
                if not data:
                    self.proc.poll()
                    self._answers.append({"error": "the zygote is gone"})
                    self._changed.notify_all()
                    return
                message = json.loads(data)
                if "exit" in message:
                    self._exits[int(message["exit"])] = int(message["status"])
                    self._live.discard(int(message["exit"]))
                elif not message.get("ready"):  # its start-up line needs no answer
                    self._answers.append(message)
                self._changed.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def reserve(self) -> None:
        """A caller will spawn from this zygote next: until that spawn returns, it is not idle."""
        with self._changed:
            self.handed += 1

    def children(self) -> int:
        """Children alive, and children about to be asked for (a zygote handed out is not idle)."""
        with self._changed:
            return len(self._live) + self.handed

    def spawn(self, module: str, args: list[str], env: dict[str, str], cwd: str, stdin: int, output: int,
              result: int) -> "Child":
        request = json.dumps({"module": module, "args": args, "env": env, "cwd": cwd}).encode()
        if len(request) > MAX_REQUEST:
            raise ZygoteError("the request is too large for the zygote")
        with self._lock:
            try:
                try:
                    socket.send_fds(self.sock, [request], [stdin, output, result])
                except OSError as exc:
                    raise ZygoteError(f"the zygote is gone ({exc})") from None
                deadline = time.monotonic() + START_TIMEOUT_S
                with self._changed:
                    while not self._answers:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise ZygoteError(f"the zygote did not answer within {START_TIMEOUT_S:.0f} s")
                        self._changed.wait(remaining)
                    answer = self._answers.pop(0)
                    if "pid" in answer and int(answer["pid"]) not in self._exits:
                        self._live.add(int(answer["pid"]))
            finally:
                with self._changed:  # its child, if it started, now counts instead
                    self.handed = max(0, self.handed - 1)
        if "pid" not in answer:
            raise ZygoteError(f"the zygote could not start the process: {answer.get('error')} (its log: {self.log})")
        return Child(self, int(answer["pid"]))

    def exit_status(self, pid: int, timeout: float | None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while pid not in self._exits:
                if not self.alive() and not self._reader.is_alive():
                    return -signal.SIGKILL  # the zygote died, and its children with it (PDEATHSIG)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._changed.wait(0.5 if remaining is None else min(remaining, 0.5))
            return self._exits.pop(pid)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - it was killed; nothing more to do
                pass


class Child:
    """A process the zygote started: the part of `subprocess.Popen` the sandbox uses."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote, self.pid = zygote, pid
        self.returncode: int | None = None
        self.stdin = None  # set by the caller: the write end of the child's stdin pipe

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_status(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.exit_status(self.pid, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
        return self.returncode



# ------------------------------------------------------------------------------------------------- zygote side
PRELOAD = ("torch", "torch._dynamo", "kernelskill.review.cuda.inline", "kernelskill.review.guards",
           "kernelskill.review.worker.stages", "kernelskill.review.worker.serve", "kernelskill.review.work",
           "kernelskill.review.probe", "triton")


def _preload(names: tuple[str, ...]) -> int | None:
    """Import `names`, once, here. A module whose import touched the CUDA driver would leave every forked child
    unable to use the GPU (CUDA does not survive a fork): each import is followed by a forked test child that makes
    a CUDA tensor where there is a GPU. Returns the index of the first module that broke it (None: none did)."""
    import importlib

    for i, name in enumerate(names):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        if not _children_can_use_cuda():
            return i
    return None


def _children_can_use_cuda() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return True
    pid = os.fork()
    if pid == 0:
        ok = not (torch.cuda._is_in_bad_fork() or torch.cuda.is_initialized())
        if ok and os.path.exists("/dev/nvidiactl"):
            try:
                torch.zeros(1, device="cuda")
            except Exception:  # noqa: BLE001 - any failure means the same: not usable
                ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _exit_status(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.send(json.dumps({"exit": pid, "status": _exit_status(status)}).encode())


def serve(fd: int, parent: int, preload: tuple[str, ...] = PRELOAD) -> None:
    """The zygote's life. `preload`: less than PRELOAD when started again after a module whose import broke CUDA in
    its children; what it leaves out, each child imports itself (seconds a child, as a plain process would)."""
    from kernelskill.review import confine_os as osl
    from kernelskill.review.worker.serve import bind_to_parent

    bind_to_parent(parent)
    sock = socket.socket(fileno=fd)
    osl.not_dumpable()
    broke = _preload(preload)
    if broke is not None:
        kept = preload[:broke]
        print(f"[kernelskill] zygote: after importing {preload[broke]}, forked children could not use CUDA; starting "
              f"again preloading only {', '.join(kept) or 'nothing'}", file=sys.stderr, flush=True)
        os.set_inheritable(fd, True)
        os.execv(sys.executable, [sys.executable, "-m", "kernelskill.review.zygote", str(fd), str(parent),
                                  ",".join(kept)])
    sock.send(json.dumps({"ready": True, "preloaded": list(preload)}).encode())
    while True:
        ready, _, _ = select.select([sock], [], [], 0.05)
        _reap(sock)
        if not ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 3)
        except OSError:
            data, fds = b"", []
        if not data:
            os._exit(0)  # the harness closed its end: it is done with us (our children die with us)
        try:
            request = json.loads(data)
            if len(fds) != 3:
                raise ValueError(f"expected 3 descriptors, got {len(fds)}")
            pid = os.fork()
        except (ValueError, OSError) as exc:
            for d in fds:
                os.close(d)
            sock.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            continue
        if pid == 0:
            _child(sock, request, fds)  # never returns
        for d in fds:
            os.close(d)
        sock.send(json.dumps({"pid": pid}).encode())


def _child(sock: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: its descriptors, its session, the PID namespace, then the module it was asked for."""
    code = 1
    try:
        from kernelskill.review.worker.serve import bind_to_parent

        bind_to_parent(0)  # dies with the zygote, as the zygote dies with the harness: each link of the chain
        sock.close()
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        # the zygote's own other descriptors stay open: libraries it loaded (NVML, the CUDA driver's) own some of
        # them, and closing them under those libraries breaks CUDA in the child ("OS call failed")
        stdin, output, result = [os.dup(d) for d in fds]  # out of the way of 0-2 before placing them there
        for d in fds:
            os.close(d)
        os.dup2(stdin, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(stdin)
        os.close(output)
        from kernelskill.review.confine import SPEC_VAR

        spec = json.loads(request["env"].get(SPEC_VAR) or "{}")
        limits = _limit_resources()
        processes = _process_namespace(bool(spec.get("layers", {}).get("processes")), result)
        if processes.get("state") == "active":
            processes["mechanism"] += f"; {limits}"
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        import tempfile

        tempfile.tempdir = None
        from kernelskill.review import confine

        confine.PROCESSES_LAYER = processes
        import runpy

        sys.argv = [request["module"], *(a.replace(RESULT_FD, str(result)) for a in request["args"])]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - printed to the child's output, which is its review's log
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _limit_resources() -> str:
    """Lower this process's limits (its children inherit them); says what they became."""
    import resource

    def lower(which: int, value: int) -> int:
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))
        return value

    try:  # every task (thread) on the machine: RLIMIT_NPROC counts its uid's threads too, the CUDA driver's included
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        running = 1 << 16
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    files = lower(resource.RLIMIT_NOFILE, OPEN_FILES)
    size = lower(resource.RLIMIT_FSIZE, FILE_BYTES)
    procs = lower(resource.RLIMIT_NPROC, running + MORE_PROCESSES)
    return f"limits: {files} open files, {size >> 30} GiB a file, {procs} processes and threads of its uid"


def _process_namespace(wanted: bool, result: int) -> dict:
    """Put the rest of this child's life in a PID namespace of its own: unshare and fork twice. This process (the
    holder, outside) and pid 1 (inside, a minimal init: it mounts /proc, reaps orphans) only wait; the process this
    function returns in is pid 2, an ordinary process (pid 1 ignores the signals it sends itself, abort() too). When
    pid 2 ends, pid 1 exits, and the kernel kills whatever is left in the namespace. Returns the layer's state."""
    from kernelskill.review import confine_os as osl
    from kernelskill.review.worker.serve import bind_to_parent

    if not wanted:
        return confine.layer("off")
    try:
        how = osl.process_namespace()
    except (osl.Unavailable, OSError) as exc:
        return confine.layer("unavailable", str(exc))
    init = os.fork()
    if init:  # the holder
        _hold(init, result, outside=True)
    bind_to_parent(0)  # pid 1 dies with the holder, and takes the namespace with it
    try:
        osl.private_mounts()
        state = confine.layer("active", f"{how} with a /proc and a /dev/shm of its own")
    except OSError as exc:
        state = confine.layer("unavailable", f"{how}, but no /proc or /dev/shm of its own: {exc}")
    worker = os.fork()
    if worker:  # pid 1
        _hold(worker, result, outside=False)
    bind_to_parent(0)
    return state


def _hold(pid: int, result: int, outside: bool) -> None:
    """Wait for `pid` (reaping any orphan meanwhile) and end the way it ended. Pid 1 cannot die of a signal it sends
    itself, so inside it exits with 128 + the signal, and the holder outside turns that back into the signal."""
    for d in (0, 1, 2, result):
        try:
            os.close(d)
        except OSError:
            pass
    while True:
        try:
            done, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if done == pid:
            break
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
    elif outside and os.WEXITSTATUS(status) > 128:
        sig = os.WEXITSTATUS(status) - 128
    else:
        os._exit(os.WEXITSTATUS(status))
    if not outside:
        os._exit(128 + sig)
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]),
          tuple(filter(None, sys.argv[3].split(","))) if len(sys.argv) > 3 else PRELOAD)
