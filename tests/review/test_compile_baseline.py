"""The compile baseline (`--baseline compile`): torch.compile(Model) timed beside the candidate, compiled before the
timed loop, and warmed into Inductor's cache ahead of the reviews (bench), on CPU (Inductor's C++ backend)."""

from __future__ import annotations

import re

import pytest

from kernelskill.candidate import read_candidate
from tests.conftest import DATA, fast_settings, run_review

P01 = "problems/p01_pointwise_gelu_chain.py"
TRITON = "candidates/p01_pointwise_gelu_chain/triton_ok.py"

pytestmark = pytest.mark.slow  # Inductor compiles C++ on the CPU: about 20 s a cold compile


def test_the_compile_is_made_before_the_timed_loop_so_no_side_loses_samples(tmp_path, fresh_inductor_cache):
    # Compiled on its first warm-up call, torch.compile's seconds counted as a warm-up call's cost: the loop's
    # budget then cut every side to the minimum of 10 samples.
    result = run_review(P01, TRITON, tmp_path, baseline="compile", warmup=2, iters=30)
    assert result.correct, result.error
    timing = result.timing
    assert timing.iters == 30
    assert len(timing.compiled_reference.samples_ms) == len(timing.candidate.samples_ms) == 30
    assert timing.compile_warmup is not None and timing.compile_warmup.seconds > 0
    assert timing.compile_warmup.fxgraph_cache_miss >= 1  # a cold cache: compiled here
    assert "torch.compile(Model) timed in the reference runner, beside the reference (called once before the loop" \
        in timing.method
    assert result.compile_ms and result.speedup_vs_compile


def test_a_warm_up_fills_inductors_cache_for_the_review(tmp_path, fresh_inductor_cache):
    from kernelskill.review.reviewer import warm_compile

    warmed = warm_compile(DATA / P01, fast_settings(), tmp_path / "warm")
    assert warmed.error is None and warmed.warmup is not None
    assert warmed.warmup.fxgraph_cache_miss >= 1
    assert "sandbox:" in (tmp_path / "warm" / "warm.log").read_text()  # its worker's log, as a review's

    result = run_review(P01, TRITON, tmp_path / "review", baseline="compile")
    assert result.correct, result.error
    # the review built and called the reference exactly as the warm-up did, in the same caches: nothing to compile
    assert result.timing.compile_warmup.fxgraph_cache_hit >= 1
    assert result.timing.compile_warmup.fxgraph_cache_miss == 0


def test_a_compile_that_fails_costs_the_baseline_not_the_candidate(tmp_path, fresh_inductor_cache):
    from kernelskill.review.reviewer import warm_compile

    problem = "problems/special/c01_inductor_cannot_build.py"
    result = run_review(problem, TRITON, tmp_path, baseline="compile", reuse_worker=False)
    assert result.correct, result.error
    assert result.compile_ms is None and result.speedup_vs_compile is None and result.speedup
    said = [f for f in result.flags if f.startswith("compile_baseline_failed")]
    assert said and "torch.compile(Model) raised" in said[0], result.flags
    # the compiler's own words are in the log of the runner that compiled it: the reference runner's
    assert "Traceback" in (tmp_path / "reference.log").read_text()

    warmed = warm_compile(DATA / problem, fast_settings(reuse_worker=False), tmp_path / "warm")
    assert warmed.warmup is None and "torch.compile(Model) failed" in warmed.error


def test_one_worker_warms_problem_after_problem_and_never_serves_a_review(tmp_path, fresh_inductor_cache):
    """torch.compile leaves changes a review's worker is retired for (Dynamo's nn.Module wrappers, Inductor's
    threads); a warm-up runs no candidate, so its worker keeps them and warms the next problem, without a start-up
    each time. It is kept apart: a review never runs in it."""
    from kernelskill.review.reviewer import warm_compile
    from kernelskill.review.sandbox import POOL

    POOL.close()
    try:
        first = warm_compile(DATA / P01, fast_settings(), tmp_path / "w1")
        assert first.error is None, first.error
        (warm,) = POOL.idle_pids()
        second = warm_compile(DATA / "problems/p02_row_softmax.py", fast_settings(), tmp_path / "w2")
        assert second.error is None and second.warmup.fxgraph_cache_miss >= 1, second.error
        assert POOL.idle_pids() == [warm]  # the same process warmed both
        assert "retired" not in (tmp_path / "w2" / "warm.log").read_text()
        review = run_review(P01, TRITON, tmp_path / "r", baseline="compile")
        assert review.correct and review.stage_seconds["start"] > 0  # a worker of its own
        assert review.timing.compile_warmup.fxgraph_cache_hit >= 1  # from the warm-up's cache
        assert warm in POOL.idle_pids()  # untouched by the review
    finally:
        POOL.close()


def test_a_warm_up_that_fails_in_a_used_worker_is_made_again_in_a_fresh_one(tmp_path, fresh_inductor_cache):
    """On the H200 a warm-up worker's Inductor compile pool broke ("Could not find an active GPU backend" in its
    subprocess) and, kept, failed every warm-up after it. A failed warm-up retires its worker and is made once more
    in a fresh one; here the problem itself cannot compile, so the fresh try fails too and says why."""
    from kernelskill.review.reviewer import warm_compile
    from kernelskill.review.sandbox import POOL

    POOL.close()
    try:
        assert warm_compile(DATA / P01, fast_settings(), tmp_path / "w1").error is None
        (used,) = POOL.idle_pids()
        failed = warm_compile(DATA / "problems/special/c01_inductor_cannot_build.py", fast_settings(), tmp_path / "w2")
        assert failed.retried and "torch.compile(Model) failed" in failed.error, failed
        assert (tmp_path / "w2" / "warm-reused-worker.log").is_file() and (tmp_path / "w2" / "warm.log").is_file()
        assert POOL.idle_pids() == []  # neither the used worker nor the fresh one is kept after a failure
        assert used not in POOL.idle_pids()
    finally:
        POOL.close()


def test_a_compile_error_is_one_line_with_its_root_cause():
    """Inductor wraps a compile subprocess's error and Dynamo appends advice on logging: the line a user (and the
    bench's warm-up line) sees names the root cause. The text is the H200's, from a warm-up log."""
    from kernelskill.review.worker.baseline import compile_error

    class InductorError(Exception):
        pass

    exc = InductorError(
        "SubprocException: An exception occurred in a subprocess:\n\n"
        "Name=triton_per_fused__softmax_addmm_exp_mean_native_dropout_prepare_softmax_online_sub_0\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/torch/.venv/lib/python3.12/site-packages/torch/_inductor/runtime/triton_helpers.py", '
        "line 52, in set_driver_to_gpu\n"
        '    raise RuntimeError("Could not find an active GPU backend")\n'
        "RuntimeError: Could not find an active GPU backend\n\n\n"
        "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a "
        'bug to PyTorch). For even more developer context, set TORCH_LOGS="+dynamo"\n')
    assert compile_error(exc) == ("InductorError: SubprocException: An exception occurred in a subprocess: ... "
                                  "RuntimeError: Could not find an active GPU backend")
    assert compile_error(ValueError("bad shape\n\nSet TORCHDYNAMO_VERBOSE=1 for more")) == "ValueError: bad shape"


class _Subproc(Exception):
    """Inductor's error for a failed compile subprocess, as the H200 printed it (class name and text)."""


_Subproc.__name__ = "InductorError"


def _fake_worker(torch):
    class W:
        device = torch.device("cpu")
        ref_model = torch.nn.ReLU()
        warm_inputs = [torch.randn(4)]

        def copy_args(self, args):
            return [a.clone() for a in args]

    W.torch = torch
    return W()


def test_a_compile_whose_subprocess_fails_is_made_again_in_process(monkeypatch, capsys):
    """On the H200 (torch 2.11, Triton 3.6) Triton's GPU detection failed in Inductor's forked compile workers, in
    fresh review workers too: 17 of 42 level-3 warm-ups. The graph itself compiles: made again with the kernels
    compiled in the worker's own process, it works, and the result and the log say so."""
    import torch
    import torch._inductor.config

    from kernelskill.review.worker.baseline import compile_reference

    tries = []

    def fake_compile(model):
        compiled = []

        def call(*args):  # compiles on its first call, as torch.compile's forward does
            if compiled:
                return model(*args)
            tries.append(torch._inductor.config.compile_threads)
            if torch._inductor.config.compile_threads > 1:
                raise _Subproc("SubprocException: An exception occurred in a subprocess:\n\nTraceback (most recent "
                               "call last):\nRuntimeError: Could not find an active GPU backend\n")
            compiled.append(True)
            return model(*args)
        return call

    monkeypatch.setattr(torch, "compile", fake_compile)
    with torch._inductor.config.patch(compile_threads=8):  # the setting is restored after the test
        run, info = compile_reference(_fake_worker(torch))
        assert torch._inductor.config.compile_threads == 1  # this process does not use the broken pool again
    assert tries == [8, 1]
    assert info.in_process_after == ("InductorError: SubprocException: An exception occurred in a subprocess: ... "
                                     "RuntimeError: Could not find an active GPU backend")
    assert "after Inductor's compile subprocess failed" in info.cache_words()
    assert torch.equal(run(torch.tensor([-1.0, 2.0])), torch.tensor([0.0, 2.0]))
    err = capsys.readouterr()
    assert "Traceback" in err.err and "compiling its kernels in this process" in err.out  # the log keeps both


def test_a_compile_that_fails_on_the_model_is_not_tried_twice(monkeypatch):
    import torch
    import torch._inductor.config

    from kernelskill.review.worker.baseline import compile_reference

    tries = []

    def fake_compile(model):
        def call(*args):
            tries.append(1)
            raise _Subproc("LoweringException: no lowering for aten.weird")
        return call

    monkeypatch.setattr(torch, "compile", fake_compile)
    with torch._inductor.config.patch(compile_threads=8), pytest.raises(_Subproc, match="no lowering"):
        try:
            compile_reference(_fake_worker(torch))
        finally:
            assert torch._inductor.config.compile_threads == 8
    assert tries == [1]


def test_a_candidate_whose_compile_fails_in_inductors_subprocess_is_run_again_compiling_in_process(
        tmp_path, fresh_inductor_cache, monkeypatch):
    """CUDA-L1's L2/49 compiles its model; on the H200 its review ended "runtime_error" with Inductor's compile pool
    failing, a kernel KernelBench's harness rates correct. Such a failure is Inductor's, not the candidate's: its first
    call is made again with the kernels compiled in the worker's own process, and the review says so."""
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "4")  # a pool, however many cores this machine has
    fresh_inductor_cache.seed_candidate(read_candidate(DATA / "candidates/special/c02_compiles_itself.py").source)
    result = run_review("problems/p13_scaled_leaky_relu.py", "candidates/special/c02_compiles_itself.py", tmp_path,
                        rules="kernelbench")
    assert result.correct, result.error
    (flag,) = [f for f in result.flags if f.startswith("inductor_compiled_in_process")]
    assert "Could not find an active GPU backend" in flag
    log = (tmp_path / "worker.log").read_text()
    assert "Traceback" in log and "compiling its kernels in this process instead" in log
    assert re.search(r"uid \d+: \d+ processes, \d+ threads; RLIMIT_NPROC \w+ \(hard \w+\)", log)  # what to tell causes by
