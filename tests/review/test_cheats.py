"""Every cheat in tests/data/cheats must be caught, by the check that is meant to catch it.

These are the runner's own guards, the first line: each case runs with the judge off (Guards.judge=False, the
runner's report as the verdict), so that removing the runner's guard is what lets the cheat through; the judge, the
second line, is proven by tests/review/test_trust_boundary.py. Each case is run twice: with all guards on (the verdict must name the check), and with the guard that catches it
turned off (the cheat must then get further — usually all the way to "correct"). The second run proves the guard,
not luck, is what stops the cheat; remove a guard from the code and the first assertion fails.
"""

from __future__ import annotations

import pytest

from kernelskill.review import timing
from tests.conftest import run_review

P01 = "problems/p01_pointwise_gelu_chain.py"

# (cheat file, settings for both runs, expected check (or error kind) with guards on,
#  guards to turn off, expected outcome with them off: "correct" or a check name)
CASES = [
    ("cheats/input_mutation.py", {"order": "candidate_first", "timing": False}, "mismatch", {"clone_inputs": False}, "correct"),
    ("cheats/cache_call_count.py", {"reverify_above": 1e9}, "runtime:timed-outputs", {"timed_outputs": False}, "correct"),
    # the extra trials scale and shift the inputs, which no seed predicts: both guards off
    ("cheats/known_seed.py", {"timing": False}, "mismatch", {"secret_seeds": False, "input_distributions": False},
     "correct"),
    ("cheats/thread_import.py", {}, "static:concurrency", {"static_checks": False}, "correct"),
    ("cheats/thread_obfuscated.py", {}, "static:dynamic-code", {"static_checks": False}, "runtime:threads"),
    ("cheats/thread_obfuscated.py", {}, "static:dynamic-code", {"static_checks": False, "no_threads": False}, "correct"),
    ("cheats/tensor_subclass.py", {}, "runtime:output-type", {"output_types": False}, "correct"),
    ("cheats/lazy_output.py", {}, "runtime:output-type", {"output_types": False}, "mismatch"),
    ("cheats/patch_isclose.py", {}, "static:monkey-patch", {"static_checks": False}, "runtime:integrity"),
    ("cheats/patch_isclose.py", {}, "static:monkey-patch", {"static_checks": False, "integrity": False}, "correct"),
    ("cheats/patch_hidden.py", {}, "runtime:integrity", {"integrity": False}, "correct"),
    ("cheats/patch_timer.py", {}, "static:monkey-patch", {"static_checks": False}, "runtime:integrity"),
    ("cheats/frame_walk.py", {"order": "reference_first", "timing": False}, "static:frame-access", {"static_checks": False}, "policy:no-custom-kernel"),
    ("cheats/frame_walk.py", {"order": "reference_first", "timing": False}, "static:frame-access", {"static_checks": False, "kernel_policy": False}, "correct"),
    ("cheats/try_fallback.py", {}, "static:try-fallback", {"static_checks": False}, "policy:no-custom-kernel"),
    ("cheats/subclass_model.py", {}, "static:reference-model", {"static_checks": False}, "policy:reruns-reference-ops"),
    ("cheats/no_kernel.py", {}, "policy:no-custom-kernel", {"kernel_policy": False}, "correct"),
    ("cheats/ghost_kernel.py", {}, "policy:reruns-reference-ops", {"kernel_policy": False}, "correct"),
]


def _outcome(result) -> str:
    if result.correct:
        return "correct"
    if result.error_kind == "rejected":
        return result.checks[0].name
    return result.error_kind


@pytest.mark.parametrize("cheat,settings,caught_by,guards_off,without", CASES, ids=lambda v: str(v)[:40])
def test_cheat_is_caught_by_its_guard(tmp_path, cheat, settings, caught_by, guards_off, without):
    from kernelskill.settings import Guards

    on = run_review(P01, cheat, tmp_path / "on", guards=Guards(judge=False), **settings)
    assert not on.correct
    assert _outcome(on) == caught_by, on.error
    if caught_by.startswith(("static:", "runtime:", "policy:")):
        assert caught_by in on.error  # the verdict names the check

    off = run_review(P01, cheat, tmp_path / "off", guards=Guards(judge=False, **guards_off), **settings)
    assert _outcome(off) == without, off.error


def test_cache_by_pointer_is_never_correct(tmp_path):
    result = run_review(P01, "cheats/cache_pointer.py", tmp_path)
    assert not result.correct
    assert result.error_kind in ("mismatch", "rejected")


def test_memory_reuse_fails_on_cpu(tmp_path):
    # The guard that matters (poisoning freed CUDA memory) is exercised on the GPU by scripts/gpu_check.py;
    # on CPU uninitialized memory simply holds garbage, which must fail.
    result = run_review(P01, "cheats/memory_reuse.py", tmp_path)
    assert result.error_kind == "mismatch"


def test_mutating_inputs_is_flagged(tmp_path):
    result = run_review(P01, "cheats/input_mutation.py", tmp_path)
    assert "candidate_mutates_inputs" in result.flags


def test_allow_torch_ops_accepts_pytorch_candidates_and_says_so(tmp_path):
    result = run_review(P01, "cheats/no_kernel.py", tmp_path, allow_torch_ops=True)
    assert result.correct
    assert "torch_ops_allowed" in result.flags


def test_degenerate_problem_is_flagged(tmp_path):
    result = run_review("problems/special/d01_near_zero_output.py", "candidates/special/d01_zeros.py", tmp_path)
    assert result.correct
    assert "degenerate_reference:near_zero" in result.flags
    assert result.speedup is not None  # reported, but flagged


def test_large_speedup_is_reverified_and_flagged(tmp_path):
    # 40 timed calls: the speedup is a mean, and on a loaded 2-core CI machine one descheduled 20 µs call among 10
    # once brought a ~300x speedup down to 1.2x
    result = run_review("problems/special/r01_redundant_work.py", "candidates/special/r01_last_only.py", tmp_path,
                        allow_torch_ops=True, reverify_above=2.0, warmup=2, iters=40)
    assert result.correct, result.error
    # the median: CI saw a few descheduled calls pull the mean speedup of this ~300x candidate down to 1.03x
    # (re-verification is triggered by the largest of mean, median and trimmed mean, so it still ran)
    assert result.timing.speedup_median > 2.0, (result.timing, result.flags, result.stage_seconds)
    assert "speedup_over_2x_reverified" in result.flags


def test_reverification_catches_a_candidate_that_goes_wrong_after_timing(tmp_path):
    # 10 timed calls, the fewest the timer cuts a loop to, so the count of calls before re-verification does not
    # depend on the machine's load (CI once cut 40 to 10 and the candidate, counting to 50, was never wrong); the
    # trigger is the largest of mean, median and trimmed mean, so one descheduled call cannot hide the speedup
    from kernelskill.settings import Guards

    common = dict(allow_torch_ops=True, warmup=2, iters=10, guards=Guards(judge=False))  # the runner's re-check
    caught = run_review("problems/special/r01_redundant_work.py", "candidates/special/r01_wrong_later.py",
                        tmp_path / "on", reverify_above=2.0, **common)
    t = caught.timing
    why = (f"timing={t and (t.speedup, t.speedup_median, t.speedup_trimmed, t.iters, t.retimed)} "
           f"flags={caught.flags} stage_seconds={caught.stage_seconds}")
    assert caught.timing.iters == timing.MIN_ITERS == 10, why  # what the candidate's count of 20 assumes
    assert caught.error_kind == "mismatch" and "re-verified" in caught.error, why
    assert "speedup_over_2x_reverify_failed" in caught.flags
    missed = run_review("problems/special/r01_redundant_work.py", "candidates/special/r01_wrong_later.py",
                        tmp_path / "off", reverify_above=1e9, **common)
    assert missed.correct  # without re-verification the cheat would have been believed


def test_a_timed_output_a_few_elements_off_is_flagged_not_rejected_as_a_cache(tmp_path):
    # The timed-output check exists for results computed for other inputs (they miss in nearly every element);
    # one element at the tolerance's edge is not that. A cached result is still rejected (cache_call_count above).
    from kernelskill.settings import Guards

    # the runner's own timed-output check (the judge's trials, after timing, hold the candidate to every element)
    result = run_review(P01, "candidates/p01_pointwise_gelu_chain/triton_marginal_timed.py", tmp_path,
                        reverify_above=1e9, guards=Guards(judge=False))
    assert result.correct, result.error
    assert any(f.startswith("timed_outputs_marginal: output 0: 1 of 4096 elements") for f in result.flags), result.flags


def test_torch_compiles_own_worker_threads_are_not_the_candidates_but_a_spoofed_module_name_is():
    # A candidate calling torch.compile leaves Inductor's compile-worker threads behind (CUDA-L1's L2/34, correct by
    # KernelBench's harness, was rejected by runtime:threads). They are recognised by the file their code is in; a
    # candidate's own function that claims to be Inductor's by __module__ is still the candidate's.
    import threading

    from torch._inductor.compile_worker import subproc_pool

    from kernelskill.review.worker.candidate import _compile_worker_thread

    def own():
        pass

    own.__module__ = "torch._inductor.compile_worker.subproc_pool"

    class OwnThread(threading.Thread):
        def run(self):
            pass

    OwnThread.__module__ = "tqdm._monitor"
    assert _compile_worker_thread(threading.Thread(target=subproc_pool.SubprocPool._read_thread))
    assert not _compile_worker_thread(threading.Thread(target=own))
    assert not _compile_worker_thread(OwnThread())
