"""The `kernelskill review` command: JSON contract, exit codes, help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CONTRACT = {"compiled", "correct", "stage", "error", "max_abs_error", "max_rel_error", "ref_ms", "candidate_ms",
            "speedup", "device", "backend", "flags", "compile_ms", "speedup_vs_compile"}


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "kernelskill.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_json_contract_for_a_correct_candidate():
    proc = cli("review", DATA / "problems/p02_row_softmax.py", DATA / "candidates/p02_row_softmax/triton_ok.py",
               "--device", "cpu", "--iters", "2", "--warmup", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert CONTRACT <= data.keys()
    assert data["compiled"] is True and data["correct"] is True and data["stage"] is None and data["error"] is None
    assert data["device"] == "cpu" and data["backend"] == "triton"
    assert data["speedup"] == data["ref_ms"] / data["candidate_ms"]
    assert data["max_abs_error"] < 1e-2
    assert data["timing"]["clock"] == "cpu_perf_counter"


def test_json_contract_for_a_wrong_candidate():
    proc = cli("review", DATA / "problems/p02_row_softmax.py", DATA / "candidates/broken/wrong_result.py",
               "--device", "cpu", "--json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["compiled"] is True and data["correct"] is False and data["stage"] == "verify"
    assert data["speedup"] is None and data["error"]
    assert data["verify"]["mismatch"]["first_indices"]


def test_exit_codes_for_compile_failure_and_rejection():
    assert cli("review", DATA / "problems/p01_pointwise_gelu_chain.py", DATA / "candidates/broken/syntax_error.py",
               "--device", "cpu").returncode == 3
    proc = cli("review", DATA / "problems/p01_pointwise_gelu_chain.py", DATA / "cheats/patch_isclose.py",
               "--device", "cpu", "--json")
    assert proc.returncode == 5
    assert "static:monkey-patch" in json.loads(proc.stdout)["error"]


def test_human_summary_and_help():
    proc = cli("review", DATA / "problems/p01_pointwise_gelu_chain.py", DATA / "candidates/broken/syntax_error.py",
               "--device", "cpu")
    assert "COMPILE FAILED" in proc.stdout and "SyntaxError" in proc.stdout
    helped = cli("review", "-h")
    assert helped.returncode == 0 and "Exit codes" in helped.stdout
    assert cli("--help").returncode == 0


def test_bad_options_are_bad_input():
    proc = cli("review", DATA / "problems/p01_pointwise_gelu_chain.py",
               DATA / "candidates/p01_pointwise_gelu_chain/triton_ok.py", "--backend", "rocm")
    assert proc.returncode == 2 and "--backend" in proc.stderr


@pytest.mark.slow
def test_baseline_compile_adds_compile_ms_and_speedup_vs_compile(tmp_path, fresh_inductor_cache):
    """--baseline compile times torch.compile(Model) with the same timer. (On a GPU, inductor also starts worker
    threads on its first call, inside the timing loop; they are not blamed on the candidate: scripts/gpu_check.py
    --part baseline checks that on the H200.) The command's sandbox has an Inductor cache of this test's own, with
    the kernels (and Inductor's precompiled header) other tests of the session compiled."""
    r = cli("review", EXAMPLES / "gelu_chain.py", EXAMPLES / "gelu_chain_triton.py", "--device", "cpu", "--baseline",
            "compile", "--trials", "2", "--warmup", "1", "--iters", "3", "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    data = json.loads(r.stdout)
    assert data["correct"] and data["compile_ms"] > 0 and data["speedup_vs_compile"] > 0
