"""Shared fixtures. Everything here runs on a CPU: Triton kernels go through Triton's interpreter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")  # any in-process Triton use in tests runs on CPU tensors
# One OpenMP thread per process, inherited by every runner, zygote and CLI the tests start (the sandbox passes OMP_*
# on). The suite runs several torch processes per core; with a thread per core each, OpenMP's spinning threads fought
# for the cores: a review of r01 took 72 s instead of 14 s on 2 busy cores, and its 30x speedup read 0.3x.
os.environ.setdefault("OMP_NUM_THREADS", "1")

DATA = Path(__file__).parent / "data"


def fast_settings(**overrides):
    """Review settings for CPU tests: full protocol (5 trials, guards on) with short timing."""
    from kernelskill.settings import ReviewSettings

    values = dict(device="cpu", warmup=1, iters=3)
    values.update(overrides)
    return ReviewSettings(**values)


def run_review(problem: str | Path, candidate: str | Path, tmp_path: Path | None = None, **overrides):
    from kernelskill.candidate import read_candidate
    from kernelskill.review.reviewer import review

    problem = DATA / problem if not Path(problem).is_absolute() else Path(problem)
    candidate = DATA / candidate if not Path(candidate).is_absolute() else Path(candidate)
    settings = fast_settings(**overrides)
    return review(problem, read_candidate(candidate, settings.backend), settings, log_dir=tmp_path)


def sandbox_without(*layers: str):
    """The sandbox with `layers` off. Where the worker keeps the harness's uid (a root harness whose Python uid 65534
    cannot read), the user layer holds only through filesystem, processes and network; turning one of those off
    turns the user layer off too, as the sandbox's own error message would ask."""
    from kernelskill.review import confine
    from kernelskill.settings import Sandbox

    off = set(layers)
    keeps_uid = confine._drop_plan({"user": True}, [])[0] is None
    if keeps_uid and off & {"filesystem", "processes", "network"}:
        off.add("user")
    return Sandbox(**{name: False for name in off})


@pytest.fixture
def review_cpu(tmp_path):
    def _run(problem, candidate, **overrides):
        return run_review(problem, candidate, tmp_path, **overrides)

    return _run


@pytest.fixture
def server():
    """A local HTTP server speaking the OpenAI chat-completions (and Anthropic messages) protocol; see
    kernelskill/llm/local_server.py."""
    from kernelskill.llm.local_server import ScriptedServer

    srv = ScriptedServer().start()
    try:
        yield srv
    finally:
        srv.stop()


# Tests that took 15 s or more on 2 busy cores (pytest --durations), marked `slow` here in one place so that
# `pytest -m "not slow"` is a fast subset: (node id prefix, a word the id must also hold or "", what makes it slow).
SLOW = (
    ("tests/review/test_verdicts.py::test_candidate_gets_expected_verdict[", "cuda", "nvcc builds (1-3 min cold)"),
    ("tests/review/test_verdicts.py::test_candidate_gets_expected_verdict[", "crash", "a worker that crashes"),
    ("tests/review/test_verdicts.py::test_candidate_gets_expected_verdict[", "hang", "a worker past its limit"),
    ("tests/review/test_prebuild.py::test_prebuild_fills_the_build_cache", "", "a CUDA build"),
    ("tests/review/test_precision.py::test_under_kernelbench_rules", "", "reviews on several input sets"),
    ("tests/review/test_precision.py::test_a_candidate_right_only_for", "", "reviews on several input sets"),
    ("tests/review/test_warm_worker.py::", "", "worker start-ups"),
    ("tests/review/test_cheats.py::test_large_speedup_is_reverified", "", "20 more verify trials"),
    ("tests/memory/test_mem_bench.py::test_a_wrong_first_choice", "", "the decision benchmark, twice"),
    ("tests/memory/test_mem_bench.py::test_cli_prints_the_accuracy", "", "the decision benchmark"),
    ("tests/memory/test_mem_cli.py::test_explain_with_the_problem", "", "the problem's floor on the meta device"),
    ("tests/memory/test_mem_method_check.py::test_cpu_smoke_run", "", "Triton and PyTorch pairs timed"),
    ("tests/bench/test_corpus.py::test_bench_over_a_corpus", "", "a bench with real reviews"),
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.nodeid.startswith(prefix) and word in item.nodeid for prefix, word, _ in SLOW):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("KERNELSKILL_ALL_CUDA_CHECKS") == "1":
        return
    skip = pytest.mark.skip(reason="extra CUDA compile check: set KERNELSKILL_ALL_CUDA_CHECKS=1 to run it")
    for item in items:
        if "all_cuda_checks" in item.keywords:
            item.add_marker(skip)


def process_running(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child its parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
