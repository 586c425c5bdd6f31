"""A worker killed at its time limit takes its compilers with it, though they run in sessions of their own."""

from __future__ import annotations

import os
import signal
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import sandbox_without

pytestmark = pytest.mark.slow
DATA = Path(__file__).parents[1] / "data"


def _fake_compiler(tmp_path: Path) -> tuple[str, str]:
    """A C++ compiler that answers --version and then hangs in `sleep <marker>` (a marker no other process has)."""
    marker = f"300.{uuid.uuid4().int % 10**6:06d}"
    path = tmp_path / "slow-c++"
    path.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in *--version*) echo "slow-c++ {marker}"; exit 0;; esac
        exec sleep {marker}
    """))
    path.chmod(0o755)
    return str(path), marker


def _sleepers(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", marker.encode()]:
                found.append(int(name))
    return found


def _review_with(tmp_path: Path, compiler: str, processes: bool = True):
    from kernelskill.candidate import parse_candidate
    from kernelskill.review.reviewer import review
    from tests.conftest import fast_settings

    source = textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline

        ext = load_inline("ks_test_slow_compiler_{uuid.uuid4().hex[:8]}", "torch::Tensor f(torch::Tensor x) {{ return x; }}",
                          functions=["f"])


        class ModelNew(nn.Module):
            def forward(self, x):
                return ext.f(x)
    """)
    candidate = parse_candidate(source, tmp_path / "candidate.py")
    settings = fast_settings(timing=False, timeouts={"compile": 4}, sandbox=sandbox_without("filesystem", *([] if processes else ["processes"])),
                             reuse_worker=False)
    env = {"CXX": compiler, "KERNELSKILL_CACHE": str(tmp_path / "cache")}
    return review(DATA / "problems/p01_pointwise_gelu_chain.py", candidate, settings, log_dir=tmp_path, env=env)


def _wait_for(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.mark.parametrize("processes", [True, False])
def test_a_timed_out_build_leaves_no_compiler_running(tmp_path, processes):
    # two guards, each enough: the worker's PID namespace (all of it dies with its pid 1) and the kill of its whole
    # process tree (which reaches compilers in sessions of their own)
    compiler, marker = _fake_compiler(tmp_path)
    result = _review_with(tmp_path, compiler, processes)
    assert result.error_kind == "timeout" and result.stage == "compile", result.error
    assert _wait_for(lambda: not _sleepers(marker)), f"compiler processes left running: {_sleepers(marker)}"


def test_killing_only_the_process_group_would_leave_it_running(tmp_path, monkeypatch):
    """The test above can fail: with the kill of old (the worker's process group only) and no PID namespace, the
    compiler survives."""
    from kernelskill.review import sandbox

    def group_only(pid: int, wait: float = 0.0) -> None:
        os.killpg(pid, signal.SIGKILL)

    monkeypatch.setattr(sandbox, "kill_tree", group_only)
    compiler, marker = _fake_compiler(tmp_path)
    result = _review_with(tmp_path, compiler, processes=False)
    left = _sleepers(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert result.error_kind == "timeout" and left


def test_a_killed_tree_has_ended_when_its_kill_returns(monkeypatch):
    # killed together with its small parents (the zygote's holder, its namespace's pid 1), a runner that held tens of
    # GB of device memory was still giving them back after its holder was reaped, and the next runner ran out of
    # memory (CUDA-L1's L2/34 on the H100: the reference's batch, right after the candidate's runner was killed).
    # Here the child takes half a second to die after its SIGKILL, as such a runner does (a CPU process dies at once)
    import subprocess
    import sys
    import threading

    from kernelskill.review import processes

    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, time\n"
                               "subprocess.Popen(['sleep', '300'], start_new_session=True)\ntime.sleep(300)"],
                              start_new_session=True)
    assert _wait_for(lambda: processes.descendants(parent.pid)), "the child did not start"
    child = processes.descendants(parent.pid)[0]
    send = processes.signal_all

    def slow_to_die(pids, sig):
        pids = list(pids)
        if sig == signal.SIGKILL and child in pids:
            threading.Timer(0.5, send, ([child], sig)).start()
            pids.remove(child)
        send(pids, sig)

    monkeypatch.setattr(processes, "signal_all", slow_to_die)
    processes.kill_tree(parent.pid, wait=10)
    parent.wait(timeout=10)
    assert not processes._running(child, None), "the child still ran when the kill returned"


def test_a_runner_is_killed_until_it_has_ended(monkeypatch, tmp_path):
    """The sandbox's kill of a runner waits for its whole tree (the test above: what that wait does)."""
    from kernelskill.review import sandbox
    from kernelskill.review.sandbox import WorkerProcess, clean_environment
    from kernelskill.settings import Sandbox

    waits = []
    kill_tree = sandbox.kill_tree
    monkeypatch.setattr(sandbox, "kill_tree", lambda pid, wait=0.0: waits.append(wait) or kill_tree(pid, wait))
    worker = WorkerProcess(clean_environment(sandbox=Sandbox()), "cpu", tmp_path / "log")
    worker.kill()
    assert waits and all(w >= 10 for w in waits), waits
