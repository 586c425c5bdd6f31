"""Honest figures: the precision a correct candidate computes in, and inputs other than get_inputs()' own, on CPU.

A candidate computing in fp16 on an fp32 problem passes the configured 1e-2 but not KernelBench's current 1e-4: it
stays correct and is flagged reduced_precision. A candidate right only for standard-normal inputs fails on the
trials whose inputs are scaled or shifted; a distribution on which the reference itself overflows is skipped, and
the result says why.
"""

from __future__ import annotations

import pytest

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


def test_under_kernelbench_rules_a_miss_on_other_inputs_is_a_flag_not_the_verdict(tmp_path):
    # KernelBench's harness tries get_inputs()' own inputs only: there the verdict is its verdict, the miss on inputs
    # scaled x10 is kept (CUDA-L1's L3/31 VisionAttention, fp16 under autocast, missed there on the H200)
    problem, candidate = "precision/p_layernorm_wide.py", "precision/layernorm_normal_only.py"
    result = run_review(problem, candidate, tmp_path, timing=False, rules="kernelbench")
    assert result.correct, result.error
    assert list(result.verify.failed_distributions) == ["scaled x10", "offset +5"]
    assert "elements outside" in result.verify.failed_distributions["scaled x10"]
    assert result.verify.distributions == ["normal", "scaled x10", "offset +5"]  # all tried
    assert any(f.startswith("other_inputs_mismatch: scaled x10 inputs") for f in result.flags)
    assert result.precision.strict_tolerance_ok is False  # outside 1e-2 there, so outside 1e-4
    assert result.policy.correct_kernelbench and not result.policy.correct_strict
    strict = run_review(problem, candidate, tmp_path / "strict", timing=False, rules="strict")
    assert strict.error_kind == "mismatch" and not strict.verify.failed_distributions  # strict: the verdict

    from rich.console import Console

    from kernelskill.review.render import print_review

    console = Console(record=True, width=300)
    print_review(result, console)
    assert "scaled x10 MISMATCHED (not part of the verdict): trial 6 of 7" in console.export_text()


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


@pytest.mark.parametrize("code, dtypes", [
    # CUDA-L1's L3/31 VisionAttention: fp16 attention under autocast, passed 1e-2 on get_inputs()' own inputs
    ("with torch.cuda.amp.autocast(enabled=x.is_cuda):\n    y = f(x)\n", ["float16"]),
    ("with torch.autocast(device_type='cuda'):\n    y = f(x)\n", ["float16"]),  # CUDA's default: fp16
    ("with torch.amp.autocast('cuda', dtype=torch.bfloat16):\n    y = f(x)\n", ["bfloat16"]),
    ("@torch.autocast('cuda', dtype=torch.float16)\ndef f(x):\n    return x\n", ["float16"]),
    ("with torch.autocast('cuda', enabled=False):\n    y = f(x)\n", []),  # switched off: fp32
    ("torch.set_float32_matmul_precision('high')\n", ["tf32"]),
    ("torch.set_float32_matmul_precision(\"medium\")\n", ["tf32"]),  # medium allows bf16 passes, TF32 at least
    ("torch.set_float32_matmul_precision('highest')\n", []),
])
def test_compute_dtypes_reads_autocast_and_matmul_precision(code, dtypes):
    from kernelskill.review.precision import compute_dtypes

    assert compute_dtypes(code) == dtypes


def test_the_review_renders_precision_and_input_distributions(tmp_path):
    from rich.console import Console

    from kernelskill.review.render import print_review

    result = run_review(SQUARE, "precision/square_fp16.py", tmp_path, timing=False)
    console = Console(record=True, width=200)
    print_review(result, console)
    text = console.export_text()
    assert "normal, scaled x10, offset +5" in text
    assert "computes in float16 (code); fails atol=rtol=0.0001" in text and "reference TF32: cudnn.allow_tf32" in text
    assert "reduced_precision" in text


# GPU kernel names the profiled verify trial saw in the CUDA-L1 bench run on the H200 (docs/h200/kernelbench/)
H200_KERNELS = {
    "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x64x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas":
        ["tf32"],
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"
    "(cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4::Params)": ["tf32"],
    "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x32x16_stage1_warpsize4x1x1_g1": ["float16"],
    "nvjet_sm90_hsh_128x16_64x11_4x1_v_bz_splitK_bias_TNT": ["float16"],
    "void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half, float, false, true, (cudnnKernelDataType_t)0>":
        ["float16"],
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas":
        [],
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>(cutlass_80_simt_sgemm_64x64_8x5_nn_align1::Params)":
        [],
    "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80>)": [],
    "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 10, 11, false, cublasGemvTensorStridedBatched<float const>>": [],
}


@pytest.mark.parametrize("name", sorted(H200_KERNELS))
def test_kernel_dtypes_read_the_math_vendor_kernels_name(name):
    from kernelskill.review.precision import kernel_dtypes

    assert kernel_dtypes([name]) == H200_KERNELS[name]


def test_a_tf32_library_kernel_behind_plain_code_makes_an_fp32_result_reduced_precision():
    """torch.matmul under allow_tf32 shows no reduced dtype in the code; the cuBLAS kernel's name does. An fp32
    problem whose candidate fails the strict tolerance and launched it is reduced_precision; without the kernel, or
    within the strict tolerance, it is not."""
    from kernelskill.review.precision import settle
    from kernelskill.review.results import Precision

    measured = Precision(output_dtypes=["float32"], strict_tolerance_ok=False, strict_mismatched=12)
    tf32 = ["sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_kernel__5x_cublas"]
    flagged = settle(measured, [], True, tf32)
    assert flagged.kernel_dtypes == ["tf32"] and flagged.reduced_precision
    assert not settle(measured, [], True, ()).reduced_precision
    assert not settle(measured.model_copy(update={"strict_tolerance_ok": True}), [], True, tf32).reduced_precision
