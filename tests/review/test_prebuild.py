"""Prebuilding a CUDA candidate on CPU cores, in a worker that sees no GPU, before its review waits for one.

On this CPU-only machine torch's CUDA libraries are missing, so the candidates here build C++-only extensions
through the same `load_inline` path; what is checked is the plumbing: the candidate's module code runs in the build
worker, its extensions land in the shared build cache (the review then finds them), and a compile error comes back
as a review verdict without any review worker.
"""

from __future__ import annotations

import os
import uuid

import pytest

CPP_OK = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(
    name="ks_prebuild_test",
    cpp_sources="torch::Tensor add_one(torch::Tensor x) { return x + 1; }  // {tag}",
    functions=["add_one"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.add_one(x)
'''


@pytest.fixture
def as_if_gpu(monkeypatch, tmp_path):
    """Make prebuild() believe a sm_90 GPU is there (it never touches one: the build worker sees none)."""
    from kernelskill.review import reviewer

    monkeypatch.setattr(reviewer, "resolve_device", lambda requested: "cuda")
    monkeypatch.setattr(reviewer, "gpu_arch", lambda: "9.0")
    # the build cache stays the session's (CI: a fresh one), so the precompiled header is built once for all tests;
    # each test's sources carry a fresh tag, so their extensions are never in the cache before the test


def _candidate(tmp_path, source):
    from kernelskill.candidate import parse_candidate

    path = tmp_path / "cand.py"
    path.write_text(source)
    return parse_candidate(source, path)


def test_prebuild_fills_the_build_cache(tmp_path, as_if_gpu, monkeypatch):
    from kernelskill.review.caches import owner_key
    from kernelskill.review.cuda import build
    from kernelskill.review.reviewer import prebuild
    from kernelskill.review.sandbox import clean_environment
    from kernelskill.settings import ReviewSettings
    from tests.conftest import DATA

    tag = uuid.uuid4().hex
    source = CPP_OK.replace("{tag}", tag)
    cand = _candidate(tmp_path, source)
    assert cand.backend == "cuda"
    built = prebuild(DATA / "problems/p01_pointwise_gelu_chain.py", cand, ReviewSettings(device="cuda"),
                     log_dir=tmp_path / "logs")
    assert built is not None and built.result is None and built.seconds > 0
    # the build cache the candidate's review reads: its own (review/caches.py)
    monkeypatch.setenv("KERNELSKILL_CACHE", clean_environment(owner=owner_key(cand.source))["KERNELSKILL_CACHE"])
    again = build.build_inline("ks_prebuild_test", "torch::Tensor add_one(torch::Tensor x) { return x + 1; }  "
                               f"// {tag}", functions=["add_one"])
    assert again.cache_hit  # the review would import it instead of building


def test_a_compile_error_is_a_verdict_without_a_review(tmp_path, as_if_gpu):
    from kernelskill.review.reviewer import prebuild
    from kernelskill.settings import ReviewSettings
    from tests.conftest import DATA

    source = CPP_OK.replace("{tag}", uuid.uuid4().hex).replace("return x + 1;", "return x + undeclared_name;")
    built = prebuild(DATA / "problems/p01_pointwise_gelu_chain.py", _candidate(tmp_path, source),
                     ReviewSettings(device="cuda"), log_dir=tmp_path / "logs")
    assert built is not None and built.result is not None
    result = built.result
    assert result.error_kind == "compile_error" and result.stage == "compile" and result.device == "cuda"
    assert "undeclared_name" in result.error and "undeclared_name" in (result.compile.errors or "")


def test_nothing_to_prebuild_for_triton_or_without_gpu(tmp_path):
    from kernelskill.review.reviewer import prebuild
    from kernelskill.settings import ReviewSettings
    from tests.conftest import DATA

    triton = _candidate(tmp_path, (DATA / "candidates/p01_pointwise_gelu_chain/triton_ok.py").read_text())
    assert prebuild(DATA / "problems/p01_pointwise_gelu_chain.py", triton, ReviewSettings(device="cpu")) is None
    cuda = _candidate(tmp_path, CPP_OK.replace("{tag}", "cpu"))
    assert prebuild(DATA / "problems/p01_pointwise_gelu_chain.py", cuda, ReviewSettings(device="cpu")) is None


def test_a_prebuild_worker_is_held_still_by_the_judges_quiet_windows(tmp_path, as_if_gpu, monkeypatch):
    """A prebuild's worker registers with the builds a judge stops during its batches (review/quiet.py) for as long
    as it builds, and leaves after."""
    from kernelskill.review import sandbox
    from kernelskill.review.reviewer import prebuild
    from kernelskill.settings import ReviewSettings
    from tests.conftest import DATA

    seen: list = []

    class Recorder:
        def add(self, pid):
            seen.append(("add", pid, os.path.exists(f"/proc/{pid}")))

        def discard(self, pid):
            seen.append(("discard", pid))

    monkeypatch.setattr(sandbox, "BUILDS", Recorder())
    # pybind11 alone: the registration is what is checked, not the build (a second of g++)
    source = CPP_OK.replace("{tag}", uuid.uuid4().hex).replace(
        'cpp_sources="torch::Tensor add_one(torch::Tensor x) { return x + 1; }',
        'no_implicit_headers=True, with_pytorch_error_handling=False,\n'
        '    cpp_sources="#include <pybind11/pybind11.h>\\nint add_one(int x) { return x + 1; }')
    assert "no_implicit_headers" in source
    built = prebuild(DATA / "problems/p01_pointwise_gelu_chain.py", _candidate(tmp_path, source),
                     ReviewSettings(device="cuda"), log_dir=tmp_path / "logs")
    assert built is not None and built.result is None, built and built.result
    assert [s[0] for s in seen] == ["add", "discard"] and seen[0][1] == seen[1][1] and seen[0][2], seen


def test_a_prebuild_targets_the_arch_its_review_builds_for(monkeypatch):
    """The arch is part of a build's cache key. A prebuild made for "9.0" (nvidia-smi's capability) was never found
    by its review, whose builder follows torch's rule for the visible device ("9.0+PTX"): on the H100 every CUDA
    candidate was built again while its review held the GPU."""
    import subprocess
    import types

    import torch

    from kernelskill.review import reviewer
    from kernelskill.review.cuda.toolchain import arch_flags

    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: types.SimpleNamespace(returncode=0, stdout="9.0\n"))
    reviewer.gpu_arch.cache_clear()
    try:
        prebuilt_for = reviewer.gpu_arch()
    finally:
        reviewer.gpu_arch.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert arch_flags(prebuilt_for, []) == arch_flags(None, [])  # what the review's runner builds for
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a")
    assert reviewer.gpu_arch.__wrapped__() == "9.0a" and arch_flags("9.0a", []) == arch_flags(None, [])
