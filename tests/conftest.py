"""Shared fixtures. Everything here runs on a CPU: Triton kernels go through Triton's interpreter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")  # any in-process Triton use in tests runs on CPU tensors

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


def pytest_collection_modifyitems(config, items):
    if os.environ.get("KERNELSKILL_ALL_CUDA_CHECKS") == "1":
        return
    skip = pytest.mark.skip(reason="extra CUDA compile check: set KERNELSKILL_ALL_CUDA_CHECKS=1 to run it")
    for item in items:
        if "all_cuda_checks" in item.keywords:
            item.add_marker(skip)
