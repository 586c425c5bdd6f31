"""Every hand-written candidate in tests/data/candidates/manifest.yaml gets its expected verdict on CPU."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.conftest import DATA, run_review

ENTRIES = yaml.safe_load((DATA / "candidates" / "manifest.yaml").read_text())

# manifest vocabulary -> what the reviewer reports
EXPECTED = {
    "correct": ("correct", None),
    "incorrect": ("mismatch", "runtime_error"),
    "compile": ("compile_error", None),
    "timeout": ("timeout", None),
    "crash": ("crash", None),
    "compiled_only": ("compiled_only", None),
}


def _outcome(result) -> str:
    if result.correct:
        return "correct"
    if result.stage is None and result.compiled:
        return "compiled_only"
    return result.error_kind


def _cases():
    for entry in ENTRIES:
        expect = entry["cpu_expect"]
        if expect in ("skip", "load"):
            continue
        marks = []
        if entry["backend"] == "cuda":
            marks.append(pytest.mark.nvcc)
            if expect == "compiled_only" and "p01_" not in entry["candidate"]:
                # p01's two sources cover the CUDA units a candidate gets (torch-free and core); each further
                # compile check costs 45-90 s on CI's 2 cores. The rest run with KERNELSKILL_ALL_CUDA_CHECKS=1.
                marks.append(pytest.mark.all_cuda_checks)
        yield pytest.param(entry, id=entry["candidate"].removeprefix("candidates/"), marks=marks)


@pytest.mark.parametrize("entry", list(_cases()))
def test_candidate_gets_expected_verdict(entry, tmp_path, request):
    if entry["backend"] == "cuda" and shutil.which("nvcc") is None:
        pytest.fail("nvcc is not on PATH: CUDA compile checks need the CUDA toolkit (install it, as .ci/run does)")
    overrides = {"timing": False}
    if entry["cpu_expect"] == "timeout":
        from kernelskill.settings import StageTimeouts

        # the hang spins a core until the limit: a few seconds past the verify stage's start are enough to tell
        overrides["timeouts"] = StageTimeouts(verify=6)
    result = run_review(entry["problem"], entry["candidate"], tmp_path, **overrides)
    allowed = EXPECTED[entry["cpu_expect"]]
    assert _outcome(result) in allowed, f"{result.error_kind}: {result.error}"
    if entry["cpu_expect"] == "compiled_only":  # checked by the GPU builder, stopped before the link
        variants = [b["cuda_variant"] for b in result.compile.builds]
        assert variants in (["torch-free"], ["split"], ["split-types"], ["core"], ["types.h"], ["exact"])
    if entry["cpu_expect"] == "compile" and entry["backend"] == "cuda":
        assert "scale_factor" in (result.compile.errors or "")  # the compiler's real message reaches the verdict


def test_candidate_without_modelnew_is_bad_input():
    from kernelskill.candidate import read_candidate
    from kernelskill.errors import CandidateError

    with pytest.raises(CandidateError, match="ModelNew"):
        read_candidate(DATA / "candidates/broken/no_modelnew.py")


def test_a_crash_does_not_affect_the_next_review(tmp_path):
    crashed = run_review("problems/p02_row_softmax.py", "candidates/broken/crash.py", tmp_path / "a", timing=False)
    assert crashed.error_kind == "crash" and "SIGABRT" in crashed.error
    ok = run_review("problems/p02_row_softmax.py", "candidates/p02_row_softmax/triton_ok.py", tmp_path / "b", timing=False)
    assert ok.correct


def test_parameters_are_copied_from_model(tmp_path):
    # p04 re-initialises its LayerNorm; the candidate keeps nn.LayerNorm defaults, so it only passes if the reviewer
    # copies matching parameters from Model into ModelNew.
    result = run_review("problems/p04_layernorm.py", "candidates/p04_layernorm/triton_ok.py", tmp_path, timing=False)
    assert result.correct, result.error


def test_timing_on_cpu_is_labelled(tmp_path):
    result = run_review("problems/p01_pointwise_gelu_chain.py", "candidates/p01_pointwise_gelu_chain/triton_ok.py", tmp_path)
    assert result.timing.clock == "cpu_perf_counter"
    assert "CPU" in result.timing.method
    assert len(result.timing.reference.samples_ms) == 3 and len(result.timing.candidate.samples_ms) == 3
    assert result.speedup == pytest.approx(result.ref_ms / result.candidate_ms)
