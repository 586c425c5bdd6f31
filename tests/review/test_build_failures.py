"""A source that failed to compile in its own lines is remembered by content: the next build of the same sources,
flags and toolchain gives the same error, with its log, without running the compiler."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kernelskill.review.cuda import CudaCompileError, build, toolchain
from kernelskill.review.cuda import cache as build_cache

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """The cache test_cuda_build.py uses."""
    root = os.environ.get("KERNELSKILL_CACHE")
    if not root:
        base = tmp_path_factory.getbasetemp()
        root = str((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kernelskill-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELSKILL_CACHE", root)
        yield Path(root)


@pytest.fixture
def broken(cache):
    # unique text: a key no build has seen; a compile check (no link), as on a machine without a GPU. Plain C++
    # without torch's headers: the memory is the same for any source, and each compile here takes milliseconds
    # where <torch/extension.h> takes 8 s of CPU even from its precompiled header (three compiles in these tests)
    source = f"// {uuid.uuid4().hex}\nint f(int x) {{\n  return x * undeclared_scale;\n}}"
    return dict(name="ks_test_remembered", cpp_sources=source, functions=None, link=False, no_implicit_headers=True,
                with_pytorch_error_handling=False)


def _build_counting(monkeypatch, kwargs) -> tuple[str, int]:
    runs = []
    original = toolchain.Runner.run

    def counting(self, argv, cwd, env=None):
        runs.append(argv)
        return original(self, argv, cwd, env)

    monkeypatch.setattr(toolchain.Runner, "run", counting)
    with pytest.raises(CudaCompileError) as info:
        build.build_inline(**kwargs)
    assert info.value.in_own_code and "undeclared_scale" in str(info.value)
    return str(info.value), len(runs)


def test_a_failed_source_is_not_compiled_again(broken, monkeypatch):
    before = set(build_cache.failures_dir().glob("*.json"))
    first, compiled = _build_counting(monkeypatch, broken)
    assert compiled >= 1 and "remembered from" not in first
    records = sorted(set(build_cache.failures_dir().glob("*.json")) - before)
    assert len(records) == 1 and "undeclared_scale" in records[0].read_text()  # the error and the log are kept
    again, compiled_again = _build_counting(monkeypatch, broken)
    assert compiled_again == 0 and again.startswith(first) and "remembered from an earlier build" in again
    assert any(e.kind == "failure" and e.paths == records for e in build_cache.entries())  # shown, pruned like the rest


def test_without_the_memory_the_compiler_runs_every_time(broken, monkeypatch):
    """The test above can fail: with nothing remembered the same source is compiled again."""
    monkeypatch.setattr(build_cache, "remembered_failure", lambda key: None)
    _build_counting(monkeypatch, broken)
    _, compiled_again = _build_counting(monkeypatch, broken)
    assert compiled_again >= 1

