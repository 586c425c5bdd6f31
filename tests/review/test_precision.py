"""Honest figures: the precision a correct candidate computes in, and inputs other than get_inputs()' own, on CPU.

A candidate computing in fp16 on an fp32 problem passes the configured 1e-2 but not KernelBench's current 1e-4: it
stays correct and is flagged reduced_precision. A candidate right only for standard-normal inputs fails on the
trials whose inputs are scaled or shifted; a distribution on which the reference itself overflows is skipped, and
the result says why.
"""

from __future__ import annotations

from tests.conftest import run_review

SQUARE = "precision/p_square.py"


def test_fp16_compute_on_an_fp32_problem_is_flagged_reduced_precision(tmp_path):
    result = run_review(SQUARE, "precision/square_fp16.py", tmp_path, timing=False)
    assert result.correct, result.error  # a flag, not a verdict
    p = result.precision
    assert p.compute_dtypes == ["float16"] and p.output_dtypes == ["float32"]
    assert p.strict_tolerance_ok is False and p.strict_mismatched > 0
    assert p.reduced_precision and "reduced_precision" in result.flags
    assert set(p.reference_tf32) == {"cuda.matmul.allow_tf32", "cudnn.allow_tf32", "float32_matmul_precision"}


def test_an_honest_fp32_candidate_passes_the_strict_tolerance_and_is_not_flagged(tmp_path):
    result = run_review(SQUARE, "precision/square_fp32.py", tmp_path, timing=False)
    assert result.correct, result.error
    assert result.precision.strict_tolerance_ok is True and result.precision.strict_mismatched == 0
    assert result.precision.compute_dtypes == [] and not result.precision.reduced_precision
    assert "reduced_precision" not in result.flags
    assert result.verify.distributions == ["normal", "scaled x10", "offset +5"]
    assert result.verify.trials == 7  # 5 of get_inputs()' own, one of each other distribution


def test_a_candidate_right_only_for_standard_normal_inputs_fails_naming_the_distribution(tmp_path):
    from kernelskill.settings import Guards

    problem, candidate = "precision/p_layernorm_wide.py", "precision/layernorm_normal_only.py"
    result = run_review(problem, candidate, tmp_path / "on", timing=False)
    assert result.error_kind == "mismatch", result.error
    assert "(scaled x10 inputs)" in result.error
    assert result.verify.mismatch.distribution == "scaled x10"
    off = run_review(problem, candidate, tmp_path / "off", timing=False, guards=Guards(input_distributions=False))
    assert off.correct, off.error  # the normal trials alone pass it: the other distributions are what catch it
    assert off.verify.distributions == ["normal"]


def test_a_distribution_the_reference_overflows_on_is_skipped_with_the_reason(tmp_path):
    result = run_review("precision/p_exp_half_square.py", "precision/exp_half_square.py", tmp_path, timing=False)
    assert result.correct, result.error
    assert result.verify.distributions == ["normal", "offset +5"]
    assert "not finite" in result.verify.skipped_distributions["scaled x10"]
    assert result.verify.trials == 6


def test_compute_dtypes_reads_code_not_comments_or_docstrings():
    from kernelskill.review.precision import compute_dtypes

    assert compute_dtypes('"""Uses half the threads."""\n# x = x.half()\ny = x * 2\n') == []
    cuda = 'src = """\n// __half h;\n__global__ void k(__nv_bfloat16* x) {}\n"""\n'
    assert compute_dtypes(cuda) == ["bfloat16"]
    assert compute_dtypes("def k(a, b):\n    return tl.dot(a, b)\n") == ["tf32"]  # Triton's default for fp32
    assert compute_dtypes('def k(a, b):\n    return tl.dot(a, b, input_precision="ieee")\n') == []
    assert compute_dtypes("y = (x.half() @ w.half()).float()\n") == ["float16"]


def test_the_review_renders_precision_and_input_distributions(tmp_path):
    from rich.console import Console

    from kernelskill.review.render import print_review

    result = run_review(SQUARE, "precision/square_fp16.py", tmp_path, timing=False)
    console = Console(record=True, width=200)
    print_review(result, console)
    text = console.export_text()
    assert "normal, scaled x10, offset +5" in text
    assert "computes in float16; fails atol=rtol=0.0001" in text and "reference TF32: cudnn.allow_tf32" in text
    assert "reduced_precision" in text
