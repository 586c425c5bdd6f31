"""The worker process: no secrets in its environment, logs kept, static checks and comparisons."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.conftest import DATA, run_review


def test_worker_environment_holds_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "t0k3n")
    monkeypatch.setenv("KERNELSKILL_HARMLESS", "1")
    result = run_review("problems/p01_pointwise_gelu_chain.py", "candidates/special/env_probe.py", tmp_path, timing=False)
    assert result.correct, result.error  # the probe returns a wrong answer if it sees any secret-like variable
    log = Path(result.log_path).read_text()
    assert "sk-test-not-a-real-key" not in log and "t0k3n" not in log
    assert "visible: KERNELSKILL_HARMLESS" in log  # the probe did run and print


def test_clean_environment_drops_secret_like_names(monkeypatch):
    from kernelskill.review.sandbox import clean_environment

    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    monkeypatch.setenv("HF_TOKEN", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("DB_PASSWORD", "x")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = clean_environment()
    assert not {"ANTHROPIC_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"} & env.keys()
    assert env["CUDA_VISIBLE_DEVICES"] == "0"


def test_full_log_is_kept_and_trimmed_copy_returned(tmp_path):
    result = run_review("problems/p02_row_softmax.py", "candidates/broken/runtime_error.py", tmp_path, timing=False)
    assert result.error_kind == "runtime_error"
    assert "runtime_error.py:" in result.error  # the candidate's own line, not the harness's frames
    assert Path(result.log_path).is_file()


def test_honest_candidates_pass_static_checks():
    from kernelskill.review.static_checks import static_checks

    sources = sorted((DATA / "candidates").glob("*/*_ok.py"))
    assert len(sources) >= 15
    for path in sources:
        assert static_checks(path.read_text(), str(path)) == [], path


@pytest.mark.parametrize("snippet,rule", [
    ("import torch\ntorch.allclose = None", "static:monkey-patch"),
    ("import torch\nsetattr(torch, 'isclose', None)", "static:monkey-patch"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True", "static:monkey-patch"),
    ("import time\ntime.perf_counter = lambda: 0.0", "static:monkey-patch"),
    ("import sys\nf = sys._getframe(1)", "static:frame-access"),
    ("import sys\nm = sys.modules['kernelskill_problem']", "static:frame-access"),
    ("def f(fr):\n    return fr.f_back.f_locals", "static:frame-access"),
    ("import gc", "static:frame-access"),
    ("import subprocess", "static:process"),
    ("import os\nos.system('true')", "static:process"),
    ("x = eval('1')", "static:dynamic-code"),
    ("import multiprocessing", "static:concurrency"),
    ("try:\n    y = 1\nexcept Exception:\n    y = 2", "static:try-fallback"),
    ("import torch.nn as nn\nclass ModelNew(Model):\n    pass", "static:reference-model"),
])
def test_static_rules(snippet, rule):
    from kernelskill.review.static_checks import static_checks

    assert rule in {c.name for c in static_checks(snippet)}


def test_static_checks_allow_plain_kernel_code():
    from kernelskill.review.static_checks import static_checks

    ok = ("import os\nimport torch\ntry:\n    import triton\nexcept ImportError:\n    triton = None\n"
          "os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\nx = torch.empty(3)\nx.data = x\n")
    assert static_checks(ok) == []


def test_compare_reports_errors_and_indices():
    from kernelskill.review.compare import compare_outputs

    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    cand = ref.clone()
    cand[2, 1] += 1.0
    cmp = compare_outputs(ref, cand, 1e-2, 1e-2, trial=0)
    assert not cmp.ok and cmp.mismatch.first_indices == [[2, 1]] and cmp.mismatch.mismatched == 1
    assert cmp.max_abs_error == pytest.approx(1.0)
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert "NaN" in compare_outputs(ref, nan, 1e-2, 1e-2, 0).mismatch.reason
    both_nan = compare_outputs(nan, nan.clone(), 1e-2, 1e-2, 0)
    assert both_nan.ok  # NaN where the reference has NaN is fine
    assert not compare_outputs(ref, ref.double(), 1e-2, 1e-2, 0).ok  # dtype must match
    assert not compare_outputs((ref, ref), ref, 1e-2, 1e-2, 0).ok  # so must the number of outputs
