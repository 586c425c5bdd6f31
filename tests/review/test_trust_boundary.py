"""Attacks on the trust boundary (tests/data/attacks): a candidate that owns its runner process must still get the
verdict it earned, because the verdict is decided in the judging process (review/judge.py).

Each attack runs with the judge on (it must be caught) and, where a switch exists, with it off (Guards.judge=False:
the runner's own report is the verdict), where it must get further: remove the judge's check and the first
assertion fails. Static checks are off in these runs: they would refuse some of these files by their text, and the
point here is what holds once such code runs.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from kernelskill.review import judge
from kernelskill.settings import Guards, StageTimeouts
from tests.conftest import DATA, run_review as _run_review

P01 = "problems/p01_pointwise_gelu_chain.py"
pytestmark = pytest.mark.slow


def run_review(*args, **settings):
    # a fresh runner for the judge-off runs too: a worker kept after a forged `done` would still hold the real one
    # in its pipe (the judge never keeps a candidate's runner; the runner-only path would)
    return _run_review(*args, reuse_worker=False, **settings)


def _guards(**off) -> Guards:
    return Guards(static_checks=False, **off)


def test_forged_verdict_is_not_taken(tmp_path):
    on = run_review(P01, "attacks/forged_verdict.py", tmp_path / "on", rules="kernelbench", guards=_guards())
    assert not on.correct and on.speedup is None, on
    off = run_review(P01, "attacks/forged_verdict.py", tmp_path / "off", rules="kernelbench",
                     guards=_guards(judge=False))
    assert off.correct and off.speedup == 500.0  # what the runner wrote about itself


def test_calls_after_the_runners_checks_are_checked(tmp_path):
    on = run_review(P01, "attacks/garbage_later.py", tmp_path / "on", rules="kernelbench", guards=_guards())
    assert not on.correct
    assert on.checks and on.checks[0].name == "judge:batch-outputs", on.error
    off = run_review(P01, "attacks/garbage_later.py", tmp_path / "off", rules="kernelbench",
                     guards=_guards(judge=False))
    assert off.correct, off.error


def test_fingerprint_cache_is_timed_by_the_judges_clock(tmp_path, monkeypatch):
    # its batch is many times slower than it claims, which the batch's cut stops (the next test); without the cut
    # the whole batch runs and the judge's clock must still hold its figure
    monkeypatch.setattr(judge, "BATCH_CUT_FACTOR", 1e9)
    settings = dict(rules="kernelbench", warmup=3, iters=30, reverify_above=1e9)
    on = run_review(P01, "attacks/fingerprint_cache.py", tmp_path / "on", guards=_guards(), **settings)
    assert on.correct, on.error
    assert any(f.startswith("timing_unconfirmed") for f in on.flags), on.flags
    # each miss sleeps 20 ms, and in the judge's batch every call misses: the candidate's time is at least that
    # much a call, less the fixed cost of the batch's calls part it is excused (over its calls). Times,
    # not speedups: the reference's time on a loaded CPU moved the speedup from 0.1x to 0.36x.
    on_ms = on.timing.candidate.median_ms
    assert on_ms >= 20 - on.judge_batch.overhead_us / 1e3 / on.judge_batch.calls, (on_ms, on.flags, on.stage_seconds)
    off = run_review(P01, "attacks/fingerprint_cache.py", tmp_path / "off", guards=_guards(judge=False), **settings)
    assert off.correct
    # the runner's own loop saw mostly cache hits
    assert off.timing.candidate.median_ms < on_ms / 3, (off.timing.candidate.median_ms, on_ms)


def test_a_batch_far_slower_than_its_claim_is_cut_at_the_judges_limit(tmp_path, monkeypatch):
    """The judge stops a candidate's batch that runs far past what its own claimed pace (or the reference's) allows,
    instead of waiting out every call: the fingerprint cache's 20 ms misses cost the H200 judge 41.6 s a batch."""
    monkeypatch.setattr(judge, "BATCH_CUT_FLOOR_S", 1.0)  # the attack's batch: hundreds of 20 ms calls
    settings = dict(rules="kernelbench", warmup=3, iters=30, reverify_above=1e9)
    on = run_review(P01, "attacks/fingerprint_cache.py", tmp_path / "on", guards=_guards(), **settings)
    assert not on.correct and on.error_kind == "timeout" and on.stage == "time", (on.error_kind, on.error)
    assert on.checks[0].name == "judge:batch-time" and "was stopped" in on.error, on.error
    assert on.speedup is None
    # the batch's parts, by the judge's clock: the prepare part and the calls part up to the cut, not every call
    assert on.stage_seconds["judge_batch"] < 15, on.stage_seconds


def test_work_done_while_inputs_are_prepared_is_counted_as_the_calls(tmp_path, monkeypatch):
    # the runner's integrity check sees the replaced `Tensor.to`; a candidate that owns its process can hook lower
    # (torch's dispatcher) or put it back before the check, so here the judge alone must hold
    monkeypatch.setattr(judge, "BATCH_CUT_FACTOR", 1e9)  # (as above: the cut would stop its batch first)
    settings = dict(rules="kernelbench", warmup=3, iters=30, reverify_above=1e9)
    on = run_review(P01, "attacks/prepare_precompute.py", tmp_path / "on", guards=_guards(integrity=False),
                    **settings)
    assert on.correct, on.error
    assert any(f.startswith("timing_unconfirmed") for f in on.flags), (on.flags, on.judge_batch)
    # 20 ms of work for every input set of the batch: the judge's pace holds at least that, less what it excuses
    # (the calls part's fixed cost, over the calls)
    on_ms = on.timing.candidate.median_ms
    excused_ms = on.judge_batch.overhead_us / 1e3 / on.judge_batch.calls
    assert on_ms >= 20 - excused_ms, (on_ms, on.judge_batch)
    off = run_review(P01, "attacks/prepare_precompute.py", tmp_path / "off", guards=_guards(integrity=False, judge=False),
                     **settings)
    assert off.correct
    # the runner's own loop found every output computed when its input sets were made
    assert off.timing.candidate.median_ms < on_ms / 3, (off.timing.candidate.median_ms, on_ms)


def _short_cut(monkeypatch):
    """The batch's cut early, so that a batch of 20 ms misses stops in a second. (The judge no longer counts any of
    a batch's prepare and commit as its calls', whose file transfers it cannot time closely enough on a GPU: work
    moved there would go unseen but for the guards tested here.)"""
    monkeypatch.setattr(judge, "BATCH_CUT_FLOOR_S", 1.0)


def _caught_by_the_batch(result) -> bool:
    """Its batch was far slower than its claim: stopped at the cut, or its figure put at the judge's pace."""
    if not result.correct:
        return result.error_kind == "timeout" and result.checks[0].name == "judge:batch-time"
    return any(f.startswith("timing_unconfirmed") for f in result.flags)


def test_work_done_while_the_masked_inputs_are_loaded_computes_nothing(tmp_path, monkeypatch):
    # with the input file unmasked, prepare_lookup's batch is lookups, its outputs right and its claim confirmed
    # (seen with the mask taken out of judged.inputs and judged.calls)
    _short_cut(monkeypatch)
    settings = dict(rules="kernelbench", warmup=3, iters=30, reverify_above=1e9)
    on = run_review(P01, "attacks/prepare_lookup.py", tmp_path / "on", guards=_guards(integrity=False), **settings)
    assert _caught_by_the_batch(on), (on.correct, on.error, on.flags, on.judge_batch)


def test_outputs_computed_while_they_are_written_are_refused(tmp_path, monkeypatch):
    # without the digests' check commit_compute's batch holds no calls, its outputs are right and its claim is
    # confirmed (seen with check_digests taken out of judge.candidate_part)
    _short_cut(monkeypatch)
    settings = dict(rules="kernelbench", warmup=3, iters=30, reverify_above=1e9)
    on = run_review(P01, "attacks/commit_compute.py", tmp_path / "on", guards=_guards(integrity=False), **settings)
    assert not on.correct and on.checks and on.checks[0].name == "judge:batch-digests", (on.error, on.flags)
    assert "not those its calls made" in on.error, on.error


def test_a_batch_that_skips_a_few_of_its_calls_is_caught_whichever_calls_are_picked(tmp_path, monkeypatch):
    # skip_in_batch returns zeros from one call in 97 of the judge's batch, and right answers everywhere else. With
    # no call compared whole, only the comparison of every call at positions drawn after the batch can see it
    # (without it the review is correct: seen with compare_samples taken out of judge.candidate_part)
    monkeypatch.setattr(judge, "BATCH_PICKS", 0)
    monkeypatch.setattr(judge, "MAX_PICKS", 0)
    settings = dict(rules="kernelbench", warmup=3, iters=30, reverify_above=1e9)
    on = run_review(P01, "attacks/skip_in_batch.py", tmp_path / "on", guards=_guards(), **settings)
    assert not on.correct and on.checks and on.checks[0].name == "judge:batch-samples", (on.error, on.flags)
    assert "sampled positions" in on.error, on.error
    # where: the call's output, its first wrong element and the values, in the result as well as the message
    wrong = on.judge_mismatch
    assert wrong is not None and wrong.first_indices and wrong.got and wrong.expected and wrong.got[0] == 0.0, wrong


def test_reference_is_timed_where_the_candidate_never_ran(tmp_path):
    settings = dict(rules="kernelbench", warmup=2, iters=10, reverify_above=1e9)
    on = run_review(P01, "attacks/reference_sabotage.py", tmp_path / "on", guards=_guards(integrity=False),
                    **settings)
    assert on.correct, on.error
    assert any(f.startswith("reference_slowed") for f in on.flags), on.flags
    # both batches' allocations were made ahead, and the review's seconds say how long that took each side
    assert {"judge_reserve", "reference_reserve"} <= set(on.stage_seconds), on.stage_seconds
    off = run_review(P01, "attacks/reference_sabotage.py", tmp_path / "off",
                     guards=_guards(integrity=False, judge=False), **settings)
    assert off.correct and not any(f.startswith("reference_slowed") for f in off.flags)


def test_the_compile_baseline_is_timed_where_the_candidate_never_ran(tmp_path):
    settings = dict(rules="kernelbench", warmup=2, iters=10, reverify_above=1e9, baseline="compile")
    on = run_review(P01, "attacks/compile_sabotage.py", tmp_path / "on", guards=_guards(integrity=False),
                    **settings)
    assert on.correct, on.error
    off = run_review(P01, "attacks/compile_sabotage.py", tmp_path / "off",
                     guards=_guards(integrity=False, judge=False), **settings)
    assert off.correct and off.timing.compiled_reference.median_ms >= 5.0  # the wrapper's sleep, timed as torch.compile
    # the 5 ms sleep is not in the judged figure (a difference, not a ratio: on a loaded machine the honest compiled
    # forward's own time on the CPU grows too)
    assert on.timing.compiled_reference.median_ms < off.timing.compiled_reference.median_ms - 4.0, (
        on.timing.compiled_reference, off.timing.compiled_reference)
    assert on.speedup_vs_compile < off.speedup_vs_compile


def test_stage_announcements_do_not_extend_the_time_limit(tmp_path):
    limits = StageTimeouts(load=60, compile=60, verify=4, time=4)
    start = time.monotonic()
    result = run_review(P01, "attacks/stage_clock.py", tmp_path, rules="kernelbench", guards=_guards(),
                        timeouts=limits)
    assert result.error_kind == "timeout", result.error
    assert time.monotonic() - start < 60


def test_a_candidate_cannot_move_its_runner_to_a_cpu_of_its_choosing(tmp_path):
    result = run_review(P01, "attacks/pick_cpu.py", tmp_path, rules="kernelbench", guards=_guards())
    assert not result.correct and "PermissionError" in (result.error or ""), result.error


def test_a_candidate_never_shares_its_runner(tmp_path):
    first = run_review(P01, "attacks/leave_state.py", tmp_path / "a", rules="kernelbench", guards=_guards())
    assert first.correct, first.error
    second = run_review(P01, "attacks/check_state.py", tmp_path / "b", rules="kernelbench", guards=_guards())
    assert second.correct, second.error


def test_what_a_candidate_plants_in_its_caches_reaches_no_other_runner(tmp_path, monkeypatch):
    """The reference runner, the runner of a candidate with other source, and every later build (through the
    precompiled headers) never find what a candidate planted in the caches it may write."""
    from kernelskill.review.caches import HEADERS_VAR, owner_key
    from kernelskill.review.confine import CACHE_VARS
    from kernelskill.review.sandbox import clean_environment

    import shutil
    import tempfile

    caches = Path(tempfile.mkdtemp(prefix="kernelskill-plant-"))  # none planted before; a runner dropped to
    caches.chmod(0o755)  # nobody must reach it (pytest's own folders are the harness user's alone)
    monkeypatch.setenv("KERNELSKILL_SANDBOX_CACHE", str(caches))
    try:
        result = run_review(P01, "attacks/plant_cache.py", tmp_path / "a", rules="kernelbench", guards=_guards())
    except BaseException:
        shutil.rmtree(caches, ignore_errors=True)
        raise
    assert result.correct, result.error

    def planted(**whose) -> list[str]:
        env = clean_environment(interpret=True, **whose)  # the runners' caches, as a review names them
        return [name for name in (*CACHE_VARS, HEADERS_VAR) if (Path(env[name]) / "planted-by-a-candidate").exists()]

    source = (DATA / "attacks/plant_cache.py").read_text()
    try:
        assert planted(owner=owner_key(source))  # the plant took, in the planter's own caches ...
        assert planted(reference=True) == []  # ... none of it where the reference runner looks, ...
        honest = (DATA / "candidates/p01_pointwise_gelu_chain/triton_ok.py").read_text()
        assert planted(owner=owner_key(honest)) == []  # ... where the next candidate's runner looks ...
        assert not (Path(clean_environment(owner=owner_key(honest))[HEADERS_VAR]) /  # ... or in the headers every
                    "planted-by-a-candidate").exists()  # build includes
    finally:
        shutil.rmtree(caches, ignore_errors=True)


def test_a_runner_never_builds_a_precompiled_header(tmp_path, monkeypatch):
    """A sandboxed runner (HEADERS_VAR set) that finds a header missing compiles without it; only the harness builds
    one (a header a candidate's process made would be included by every later candidate's build)."""
    from kernelskill.review.caches import HEADERS_VAR
    from kernelskill.review.cuda import pch

    monkeypatch.setenv(HEADERS_VAR, str(tmp_path / "headers"))
    (tmp_path / "headers").mkdir()

    class Compiler:
        calls: list = []

        def run(self, argv, cwd):
            self.calls.append(argv)
            return 0, "", 0.0

    compiler, notes = Compiler(), []
    flags, seconds, _ = pch.header_flags(["-O3"], compiler, notes, wait=True)
    assert flags == [] and compiler.calls == [] and seconds == 0.0
    assert "not built yet" in notes[0]
    flags, _, _ = pch.split_header_flags(["g++"], ["-O3"], "#include <ATen/core/Tensor.h>\n", compiler, notes)
    assert flags == [] and compiler.calls == []
    assert list((tmp_path / "headers").iterdir()) == []
    with pytest.raises(Exception, match="never builds"):
        pch.prepare_pch(with_cuda=False)


def test_a_source_nested_too_deeply_is_a_compile_error_not_a_crash(tmp_path):
    from kernelskill.candidate import parse_candidate

    body = " + ".join(["x"] * 3000)
    source = f"import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return {body}\n"
    candidate = parse_candidate(source)
    assert candidate.syntax_error and "nests" in candidate.syntax_error
    from kernelskill.review.static_checks import static_checks

    with pytest.raises(RecursionError):  # what the depth limit keeps every later reader of the tree from
        static_checks(source)


def test_a_flooded_log_is_capped_as_it_arrives_and_open_files_are_limited(tmp_path):
    from kernelskill.review import logs, zygote

    result = run_review(P01, "attacks/resource_hog.py", tmp_path, rules="kernelbench", guards=_guards(), timing=False)
    assert result.correct, result.error
    log = Path(result.log_path)
    assert log.stat().st_size < logs.LOG_HEAD + logs.LOG_TAIL + 4096  # 40 MB printed
    text = log.read_text()
    assert "[kernelskill] the log was capped at 16 MiB" in text
    assert "resource-hog: the end of the flood" in text  # the end of a flood is kept: that is where tracebacks are
    stopped = re.search(r"resource-hog: stopped at (\d+) open files", text)
    assert stopped and int(stopped.group(1)) < zygote.OPEN_FILES, text[-2000:]
