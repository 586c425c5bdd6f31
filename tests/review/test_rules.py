"""The two rule sets (`--rules strict|kernelbench`) and how ModelNew's parameters are set, on CPU.

One review gives both verdicts: strict-only violations (try/except fallbacks, global backend switches, no kernel of
its own, re-running the reference's operators) never stop a candidate that is safe to run, so the result says
whether it is correct and how fast under both rule sets; real cheats fail under both.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_review

P01 = "problems/p01_pointwise_gelu_chain.py"


@pytest.mark.parametrize("cheat,violation", [
    ("cheats/try_fallback.py", "static:try-fallback"),
    ("cheats/no_kernel.py", "policy:no-custom-kernel"),
    ("cheats/ghost_kernel.py", "policy:reruns-reference-ops"),
    ("rules/p01_backend_flags.py", "static:backend-flags"),
    ("rules/p01_ctypes.py", "static:native-calls"),
])
def test_strict_only_violations_are_run_and_judged_under_both_rule_sets(tmp_path, cheat, violation):
    strict = run_review(P01, cheat, tmp_path / "strict")
    assert not strict.correct and strict.error_kind == "rejected" and violation in strict.error
    assert violation in {v.name for v in strict.policy.violations}
    assert strict.timing is not None and strict.speedup is not None  # it ran: how fast is known under strict too
    assert strict.policy.correct_kernelbench and not strict.policy.correct_strict

    kernelbench = run_review(P01, cheat, tmp_path / "kb", rules="kernelbench")
    assert kernelbench.correct, kernelbench.error
    assert kernelbench.flags.count(violation) == 1  # kept, by name, once however many lines break it
    assert kernelbench.policy.rules == "kernelbench" and not kernelbench.policy.correct_strict


@pytest.mark.parametrize("cheat,check", [
    ("cheats/patch_isclose.py", "static:monkey-patch"),
    ("cheats/patch_hidden.py", "runtime:integrity"),
    ("cheats/ctypes_patch.py", "runtime:integrity"),
    ("cheats/frame_walk.py", "static:frame-access"),
    ("cheats/thread_import.py", "static:concurrency"),
    ("cheats/tensor_subclass.py", "runtime:output-type"),
    ("cheats/cache_call_count.py", "runtime:timed-outputs"),
])
def test_real_cheats_fail_under_kernelbench_rules_too(tmp_path, cheat, check):
    result = run_review(P01, cheat, tmp_path, rules="kernelbench", reverify_above=1e9)
    assert not result.correct and result.error_kind == "rejected"
    assert check in result.error
    assert not result.policy.correct_kernelbench


def test_a_rule_broken_on_two_lines_is_one_flag_and_two_checks(tmp_path):
    result = run_review(P01, "rules/p01_ctypes.py", tmp_path, rules="kernelbench", timing=False)
    assert result.correct, result.error
    assert result.flags.count("static:native-calls") == 1
    assert [v.name for v in result.policy.violations].count("static:native-calls") == 2  # both lines, with detail


def test_a_backend_switch_is_recorded_and_undone_before_the_next_review(tmp_path):
    from kernelskill.settings import Guards

    # a worker serving the next review: the runner-only path (the judge never reuses a candidate's runner)
    flagged = run_review(P01, "rules/p01_backend_flags.py", tmp_path / "a", rules="kernelbench", timing=False,
                         guards=Guards(judge=False))
    assert flagged.correct
    assert "backend_flag_changed:cudnn.benchmark=True" in flagged.flags
    # the same warm worker serves the next review of that source (a worker serves no other source: its caches are
    # that source's): the switch was put back after the first, so the second sees it made again
    again = run_review(P01, "rules/p01_backend_flags.py", tmp_path / "b", rules="kernelbench", timing=False,
                       guards=Guards(judge=False))
    assert again.correct and again.stage_seconds.get("start") == 0.0  # reused worker
    assert "backend_flag_changed:cudnn.benchmark=True" in again.flags, again.flags


def test_parameters_derived_from_the_seeded_init_are_kept(tmp_path):
    # The candidate halves Model's same-seeded weight and doubles the input; copying Model's weight would double
    # the result. KernelBench's harness accepts it, so must we.
    result = run_review("problems/p08_linear_bias_relu.py", "candidates/p08_linear_bias_relu/triton_derived_weights.py",
                        tmp_path, timing=False)
    assert result.correct, result.error
    assert result.policy.weights == "same_seed"


def test_parameters_created_in_another_order_are_copied_by_name(tmp_path):
    # p04 re-initialises its LayerNorm after construction; the candidate keeps nn.LayerNorm defaults
    result = run_review("problems/p04_layernorm.py", "candidates/p04_layernorm/triton_ok.py", tmp_path, timing=False)
    assert result.correct, result.error
    assert result.policy.weights == "copied_by_name"


def test_a_wrong_candidate_with_matching_parameters_still_fails(tmp_path):
    result = run_review("problems/p02_row_softmax.py", "candidates/broken/wrong_result.py", tmp_path, timing=False)
    assert result.error_kind == "mismatch"


def test_rules_option_is_validated(tmp_path):
    from typer.testing import CliRunner

    from kernelskill.cli import app

    out = CliRunner().invoke(app, ["review", "p.py", "c.py", "--rules", "loose"])
    assert out.exit_code != 0


def test_a_stateful_reference_holds_the_candidate_to_its_own_timed_outputs(tmp_path):
    # KernelBench's L3/33-34 (VanillaRNN) keep their hidden state across calls; CUDA-L1's kernels for them were
    # rejected as "cached outputs" because the timed outputs were compared with outputs the reference gave before
    # its state moved on. A faithful candidate passes, flagged; on a stateless problem a cache still fails (above).
    result = run_review("problems/special/s01_stateful_rnn_cell.py", "candidates/special/s01_stateful_rnn_cell.py",
                        tmp_path, rules="kernelbench", reverify_above=1e9)
    assert result.correct, result.error
    assert any(f.startswith("stateful_reference") for f in result.flags), result.flags


def test_under_kernelbench_rules_a_candidate_cannot_read_its_own_source_back(tmp_path):
    """KernelBench's harness execs a CUDA or plain-PyTorch candidate from its text, so torch.jit.script (which reads
    the source back) fails there and CUDA-L1's level-1 BatchNorm falls back to working code; run from its file, the
    scripted function is called with a float for a Tensor and raises. --rules kernelbench gives KernelBench's
    verdict; strict runs it from its file (and rejects the fallback anyway)."""
    kernelbench = run_review(P01, "rules/p01_reads_own_source.py", tmp_path / "kb", rules="kernelbench", timing=False)
    assert kernelbench.correct, kernelbench.error
    assert "static:try-fallback" in kernelbench.flags

    strict = run_review(P01, "rules/p01_reads_own_source.py", tmp_path / "strict", timing=False)
    assert not strict.correct and strict.error_kind == "runtime_error"
    assert "Unable to cast 2.0 to Tensor" in strict.error


def test_modules_are_moved_to_the_device_before_every_trial_as_kernelbench_does(tmp_path):
    """KernelBench's harness calls `.cuda()` on both models before each trial. CUDA-L1's L3/39 (GRU) captures a CUDA
    graph on its first call; the GRU re-packs its weights on every move, the graph reads the freed buffer, and
    KernelBench fails 2 of its 5 trials, where the caching allocator gave the freed buffer to other tensors, and a
    harness that moves the modules once passed all. The candidate here does the same on the CPU (its weight moved to
    a new tensor on every `_apply`, the old one overwritten by the candidate itself)."""
    result = run_review("problems/p08_linear_bias_relu.py", "candidates/special/k01_stale_after_move.py", tmp_path,
                        rules="kernelbench", timing=False)
    assert result.error_kind == "mismatch", (result.error_kind, result.error)
    assert "trial 1 of" in result.error, result.error


def test_weights_a_move_left_behind_are_kept_and_reading_them_is_a_strict_only_violation(tmp_path):
    """CUDA-L1's L3/35, 37, 41, 42: a CUDA graph captured on the first call reads an RNN's old weight buffer, freed
    when the harness moves the module again. KernelBench's harness rates them correct (the freed block happened not
    to be reused); poisoning freed memory failed them all. The old buffer is now kept alive, so the trials pass as
    there, and one more trial with it overwritten names what the candidate does: `runtime:stale-weights`, a flag under
    kernelbench, the verdict under strict (after it was timed, as for every strict-only violation)."""
    problem, candidate = "problems/p08_linear_bias_relu.py", "candidates/special/k02_stale_weights.py"
    kernelbench = run_review(problem, candidate, tmp_path / "kb", rules="kernelbench", timing=False)
    assert kernelbench.correct, kernelbench.error
    assert "runtime:stale-weights" in kernelbench.flags
    assert kernelbench.policy.correct_kernelbench and not kernelbench.policy.correct_strict
    detail = next(v.detail for v in kernelbench.policy.violations if v.name == "runtime:stale-weights")
    assert "old weight buffer(s) behind" in detail and "elements outside" in detail, detail

    strict = run_review(problem, candidate, tmp_path / "strict")
    assert not strict.correct and strict.error_kind == "rejected"
    assert "runtime:stale-weights" in strict.error
    assert strict.timing is not None and strict.policy.correct_kernelbench


def test_a_module_that_repacks_its_weights_on_a_move_but_reads_its_own_is_not_flagged(tmp_path):
    result = run_review("problems/p08_linear_bias_relu.py", "candidates/special/k03_repacks_reads_current.py",
                        tmp_path, rules="kernelbench", timing=False)
    assert result.correct, result.error
    assert not any("stale-weights" in f for f in result.flags), result.flags
    assert "runtime:stale-weights" not in {v.name for v in result.policy.violations}
