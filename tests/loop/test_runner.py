"""The loop's logic (Algorithm 1) with scripted agents and a scripted reviewer: seeds, base choice, promotion and
non-promotion, the repair chain, giving up on a failed optimization, ablations, budgets, failures, resume."""

from __future__ import annotations

import pytest

from kernelskill.agents.render import SECTION_DECISION, SECTION_METHODS, SECTION_OPT_MEMORY, SECTION_REPAIR_HISTORY
from kernelskill.llm.accounting import Budget
from kernelskill.llm.base import LLMAuthError
from kernelskill.loop.optimize import OptimizeRequest, optimize
from kernelskill.loop.settings import LoopSettings
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore

from .helpers import PROBLEM, AgentScript, FakeEvaluator, Unavailable, diagnosis, features, kernel, plan


def run(tmp_path, client, *, rounds=0, seeds=3, resume=False, budget=None, profiler=None, prebuild=None, **loop):
    request = OptimizeRequest(
        problem=PROBLEM, model="script:", out=tmp_path / "run", resume=resume,
        loop=LoopSettings(seeds=seeds, rounds=rounds, profile="off" if profiler is None else "auto",
                          **{"parallel_seeds": False, **loop}),
        review=ReviewSettings(device="cpu"), budget=budget or Budget(),
    )
    return optimize(request, client=client, evaluator=FakeEvaluator(profiler=profiler, prebuilder=prebuild))


def test_best_seed_becomes_base_and_promotion_rule(tmp_path):
    client = AgentScript(
        generator=[kernel("correct", 1.0), kernel("compile_error"), kernel("correct", 1.2)],
        feature_extractor=[features(), features()],
        planner=[plan("kernel_fusion"), plan("cuda_graphs"), plan("kernel_fusion", what_differs="bigger blocks")],
        optimizer=[kernel("correct", 2.0), kernel("correct", 2.1), kernel("correct", 1.9)],
    )
    s = run(tmp_path, client, rounds=3)
    assert s.success and s.best_label == "round-02" and s.best_speedup == pytest.approx(2.1)
    assert s.history[-1].best_speedup == pytest.approx(s.best_speedup)  # the summary agrees with itself
    seeds = [r for r in s.history if r.round == 0]
    assert [r.verdict for r in seeds] == ["correct", "compile_error", "correct"]
    assert [r.promoted for r in seeds] == [None, None, "best+base"]  # the fastest correct seed
    r1, r2, r3 = (r for r in s.history if r.round > 0)
    assert r1.promoted == "best+base"  # 2.0 / 1.2 > 1.3
    assert r2.promoted == "best"  # faster than best, but 2.1 / 2.0 < 1.3 and 2.1 - 2.0 < 0.3: base stays
    assert r3.promoted is None  # slower than both
    # the optimization memory of base round-01 holds its two attempts, and the Planner saw the first in round 3
    third = client.prompts("planner")[2]
    assert SECTION_OPT_MEMORY in third and "cuda_graphs" in third
    assert (tmp_path / "run" / "best.py").read_text().count("# verdict: correct 2.1") == 1
    with RunStore.open(tmp_path / "run") as store:
        task = store.tasks(store.latest_run().id)[0]
        assert [r.status for r in store.rounds(task.id)] == ["done"] * 4
        assert len(store.candidates(task.id)) == 6 and len(store.decisions(task.id)) == 3
        assert store.llm_totals(task.id)["calls"] == len(client.calls) == 3 + 2 + 3 + 3  # features once per base
    assert not client.unused()


def test_repair_chain_sees_its_history_and_fixed_kernel_is_credited_to_its_method(tmp_path):
    client = AgentScript(
        generator=[kernel("correct", 1.0)],
        feature_extractor=[features()],
        planner=[plan("kernel_fusion")],
        optimizer=[kernel("mismatch")],
        diagnoser=[diagnosis("wrong constant"), diagnosis("missing semicolon")],
        repairer=[kernel("compile_error"), kernel("correct", 1.5)],
    )
    s = run(tmp_path, client, seeds=1, rounds=3)
    assert [(r.branch, r.verdict) for r in s.history[1:]] == [
        ("optimize", "mismatch"), ("repair", "compile_error"), ("repair", "correct")]
    assert s.history[-1].promoted == "best+base" and s.history[-1].method == "kernel_fusion"
    first, second = client.prompts("diagnoser")
    assert SECTION_REPAIR_HISTORY not in first  # the chain starts here
    assert SECTION_REPAIR_HISTORY in second and "wrong constant" in second  # the Diagnoser sees the whole chain
    assert "fuse the two kernels" in second  # ... and the goal of the optimization that failed


def test_gives_up_after_max_repairs_and_remembers_the_failure(tmp_path):
    client = AgentScript(
        generator=[kernel("correct", 1.0)],
        feature_extractor=[features()],
        planner=[plan("kernel_fusion"), plan("cuda_graphs")],
        optimizer=[kernel("mismatch"), kernel("correct", 1.1)],
        diagnoser=[diagnosis(), diagnosis()],
        repairer=[kernel("mismatch"), kernel("mismatch")],
    )
    s = run(tmp_path, client, seeds=1, rounds=4, max_repairs=2)
    assert [r.branch for r in s.history[1:]] == ["optimize", "repair", "repair", "optimize"]
    assert "gave up after 2 repairs" in s.history[3].note
    last_plan = client.prompts("planner")[-1]
    assert SECTION_OPT_MEMORY in last_plan and "kernel_fusion" in last_plan and "failed" in last_plan


def test_no_correct_seed_repairs_the_most_promising_failure(tmp_path):
    client = AgentScript(
        generator=[kernel("compile_error"), kernel("mismatch")],
        diagnoser=[diagnosis()],
        repairer=[kernel("correct", 0.8)],
    )
    s = run(tmp_path, client, seeds=2, rounds=1)
    assert s.history[-1].branch == "repair" and s.history[-1].promoted == "best+base"
    assert "mismatch" in client.prompts("diagnoser")[0]  # the seed that compiled was chosen for repair


def test_unusable_reply_costs_the_round_not_the_run(tmp_path):
    client = AgentScript(
        generator=[kernel("correct", 1.0)],
        feature_extractor=[features()],
        planner=["I would fuse things.", "Still no JSON.", plan("kernel_fusion")],
        optimizer=[kernel("correct", 1.5)],
    )
    s = run(tmp_path, client, seeds=1, rounds=2)
    r1, r2 = s.history[1:]
    assert r1.verdict == "no_candidate" and "planner" in r1.note
    assert r2.verdict == "correct" and s.best_speedup == 1.5
    with RunStore.open(tmp_path / "run") as store:
        task = store.tasks(store.latest_run().id)[0]
        assert [r.status for r in store.rounds(task.id)] == ["done", "failed", "done"]


def test_long_term_memory_off_removes_policy_and_feature_extractor(tmp_path):
    client = AgentScript(generator=[kernel("correct", 1.0)], planner=[plan("my own idea")],
                         optimizer=[kernel("correct", 1.1)])
    run(tmp_path, client, seeds=1, rounds=1, long_term_memory=False)
    prompt = client.prompts("planner")[0]
    assert SECTION_DECISION not in prompt and SECTION_METHODS not in prompt
    assert not [a for a, _ in client.calls if a == "feature_extractor"]


def test_long_term_memory_on_restricts_the_planner_to_allowed_methods(tmp_path):
    client = AgentScript(generator=[kernel("correct", 1.0)], feature_extractor=[features()],
                         planner=[plan("my own idea"), plan("kernel_fusion")], optimizer=[kernel("correct", 1.1)])
    s = run(tmp_path, client, seeds=1, rounds=1)
    first, reask = client.prompts("planner")
    assert SECTION_DECISION in first and SECTION_METHODS in first
    assert "kernel_fusion" in reask  # the re-ask lists the allowed methods
    assert s.history[-1].method == "kernel_fusion"
    with RunStore.open(tmp_path / "run") as store:
        task = store.tasks(store.latest_run().id)[0]
        (decision,) = store.decisions(task.id)
        assert "kernel_fusion" in decision.allowed


def test_short_term_memory_off_removes_history_from_prompts(tmp_path):
    client = AgentScript(
        generator=[kernel("correct", 1.0)], feature_extractor=[features()],
        planner=[plan("kernel_fusion"), plan("kernel_fusion")],
        optimizer=[kernel("mismatch"), kernel("correct", 1.05)],
        diagnoser=[diagnosis(), diagnosis()], repairer=[kernel("mismatch"), kernel("correct", 1.1)],
    )
    run(tmp_path, client, seeds=1, rounds=4, short_term_memory=False)
    assert all(SECTION_REPAIR_HISTORY not in p for p in client.prompts("diagnoser") + client.prompts("repairer"))
    assert all(SECTION_OPT_MEMORY not in p for p in client.prompts("planner"))


def test_budget_ends_the_task_and_keeps_the_best_kernel(tmp_path):
    client = AgentScript(generator=[kernel("correct", 1.0)], feature_extractor=[features()],
                         planner=[plan("kernel_fusion")], optimizer=[kernel("correct", 2.0)])
    # each call costs 150 tokens: seed + features + plan + optimizer = 600, the next call is refused
    s = run(tmp_path, client, seeds=1, rounds=5, budget=Budget(max_tokens=600))
    assert s.success and s.best_speedup == 2.0 and "token budget" in s.ended
    assert s.rounds_run == 2 and s.llm_calls == 4


def test_unreachable_model_ends_the_task_cleanly(tmp_path):
    client = AgentScript(generator=[kernel("correct", 1.0)], feature_extractor=[features()],
                         planner=[Unavailable("the model is down")])
    s = run(tmp_path, client, seeds=1, rounds=3)
    assert s.success and "unavailable" in s.ended and s.rounds_run == 1


def test_auth_error_stops_the_run_at_once(tmp_path):
    client = AgentScript(generator=[LLMAuthError("OPENAI_API_KEY was rejected", env_var="OPENAI_API_KEY")])
    with pytest.raises(LLMAuthError):
        run(tmp_path, client, seeds=1, rounds=3)


def test_resume_continues_after_the_last_finished_round(tmp_path):
    class Crash(BaseException):  # like a kill: nothing in the loop catches it
        pass

    client = AgentScript(generator=[kernel("correct", 1.0)], feature_extractor=[features()],
                         planner=[plan("kernel_fusion"), Crash()], optimizer=[kernel("correct", 1.1)])
    with pytest.raises(Crash):
        run(tmp_path, client, seeds=1, rounds=3)
    # round 2 was in flight: it is redone; the seed and round 1 are not (features of the base are remembered too)
    client2 = AgentScript(planner=[plan("cuda_graphs"), plan("kernel_fusion", what_differs="x")],
                          optimizer=[kernel("correct", 1.15), kernel("correct", 1.2)])
    s = run(tmp_path, client2, seeds=1, rounds=3, resume=True)
    assert s.rounds_run == 3 and [r.round for r in s.history] == [0, 1, 2, 3]
    assert [a for a, _ in client2.calls] == ["planner", "optimizer"] * 2
    assert s.best_speedup == 1.2 and s.llm_calls == 4 + 4  # calls of both processes, the crashed one included
    with RunStore.open(tmp_path / "run") as store:
        task = store.tasks(store.latest_run().id)[0]
        assert [r.status for r in store.rounds(task.id)] == ["done", "done", "abandoned", "done", "done"]


def test_profile_of_each_base_is_stored_and_used_once(tmp_path):
    from kernelskill.memory.policy.evidence import Evidence

    profiled = []

    def profiler(problem, candidate, kb, settings):
        profiled.append(candidate.name)
        return Evidence(ncu_status="failed", ncu_note="scripted profiler: no ncu here")

    client = AgentScript(generator=[kernel("correct", 1.0)], feature_extractor=[features()],
                         planner=[plan("kernel_fusion"), plan("cuda_graphs")],
                         optimizer=[kernel("correct", 1.1), kernel("correct", 1.05)])
    run(tmp_path, client, seeds=1, rounds=2, profiler=profiler)
    assert profiled == ["seed-1.py"]  # the base did not change: profiled once
    with RunStore.open(tmp_path / "run") as store:
        task = store.tasks(store.latest_run().id)[0]
        seed = next(c for c in store.candidates(task.id) if c.label == "seed-1")
        assert store.profile_of(seed.id).evidence["ncu_note"] == "scripted profiler: no ncu here"
        assert all(d.decision["ncu_status"] == "failed" for d in store.decisions(task.id))


def test_prebuild_runs_before_the_review_and_a_build_failure_needs_no_device(tmp_path):
    """A CUDA candidate is built before it waits for the device; one that does not compile is never reviewed."""
    from kernelskill.review.results import CompileResult, ReviewResult
    from kernelskill.review.reviewer import Prebuilt

    built = []

    def prebuild(problem, candidate, settings, log_dir):
        built.append(candidate.filename)
        if "prebuild-fails" not in candidate.source:
            return Prebuilt(seconds=2.5, stages={"start": 0.4, "compile": 1.9})
        return Prebuilt(seconds=1.5, result=ReviewResult(
            device="cuda", backend="triton", compiled=False, correct=False, stage="compile", error_kind="compile_error",
            error="cuda.cu:7: error: identifier x is undefined", stage_seconds={"compile": 1.5},
            compile=CompileResult(ok=False, backend="triton", errors="cuda.cu:7: error")))

    failing = kernel("correct", 3.0).replace("```python\n", "```python\n# prebuild-fails\n", 1)
    client = AgentScript(generator=[kernel("correct", 1.0), failing])
    s = run(tmp_path, client, seeds=2, prebuild=prebuild)
    assert len(built) == 2
    assert [r.verdict for r in s.history] == ["correct", "compile_error"]  # not the 3.0x the reviewer would say
    with RunStore.open(tmp_path / "run") as store:
        task = store.tasks(store.latest_run().id)[0]
        reviews = [store.review_of(c.id) for c in store.candidates(task.id)]
        assert reviews[0].stage_seconds["prebuild"] == 2.5 and "queue" in reviews[0].stage_seconds
        # where the prebuild's seconds went, kept with the review (its worker's start, its build)
        assert reviews[0].stage_seconds["prebuild_start"] == 0.4 and reviews[0].stage_seconds["prebuild_compile"] == 1.9
        assert reviews[1].stage_seconds == {"compile": 1.5, "prebuild": 1.5}
        assert store.stage_totals(task.id)["prebuild"] == 4.0
    assert s.stage_seconds["prebuild"] == 4.0


def test_on_a_gpu_the_decision_reads_the_problems_floor(tmp_path, monkeypatch):
    # issue 16: with device cuda the policy gets the problem's FLOPs and bytes (counted on the meta device), the GPU's
    # name and the base's measured time, so the headroom tier is the distance to the speed of light
    monkeypatch.setattr("kernelskill.loop.evaluator.device_name_of", lambda device: "NVIDIA H200")
    monkeypatch.setattr("kernelskill.review.reviewer.resolve_device", lambda requested: "cuda")
    client = AgentScript(generator=[kernel("correct", 2.0)], feature_extractor=[features()],
                         planner=[plan("kernel_fusion")], optimizer=[kernel("correct", 2.1)])
    request = OptimizeRequest(problem=PROBLEM, model="script:", out=tmp_path / "run",
                              loop=LoopSettings(seeds=1, rounds=1, profile="off", parallel_seeds=False),
                              review=ReviewSettings(device="cuda"), budget=Budget())  # fmt: skip
    optimize(request, client=client, evaluator=FakeEvaluator("cuda"))
    with RunStore.open(tmp_path / "run") as store:
        (decision,) = store.decisions(store.tasks(store.latest_run().id)[0].id)
    runs = {f["id"]: f for f in decision.decision["run_features"]}
    assert runs["forward_ms"]["source"] == "problem" and runs["forward_ms"]["value"] == pytest.approx(0.5)
    assert runs["sol_ms"]["status"] == "ok" and runs["sol_ms"]["value"] > 0
    pct = next(d for d in decision.decision["derived"] if d["id"] == "pct_of_floor")
    assert pct["value"] == pytest.approx(100 * runs["sol_ms"]["value"] / 0.5)


def test_kernels_are_compared_on_trimmed_means_so_a_few_slow_samples_do_not_decide_the_best(tmp_path):
    """Round 2's mean says 1.9x (below round 1's 2.0x) only because a few samples were slow; its trimmed mean says
    2.6x. It becomes best and base (2.6 / 2.0 > 1.3); the reported figure stays the paper's mean-based one."""
    client = AgentScript(
        generator=[kernel("correct", 1.0)],
        feature_extractor=[features(), features()],
        planner=[plan("kernel_fusion"), plan("cuda_graphs")],
        optimizer=[kernel("correct", 2.0, robust=2.0), kernel("correct", 1.9, robust=2.6)],
    )
    s = run(tmp_path, client, seeds=1, rounds=2)
    r1, r2 = (r for r in s.history if r.round > 0)
    assert r1.promoted == "best+base"
    assert r2.promoted == "best+base", [(r.label, r.promoted, r.speedup) for r in s.history]
    assert s.best_label == "round-02" and s.best_speedup == pytest.approx(1.9)


def test_a_reduced_precision_best_keeps_the_fastest_fp32_kernel_beside_it(tmp_path):
    """The fastest seed passes only the loose tolerance in fp16: it is the best (the configured tolerance decides),
    flagged; the task's figure without reduced-precision results is its fastest fp32 kernel's."""
    client = AgentScript(generator=[kernel("correct", 1.2), kernel("correct", 3.0, reduced=True),
                                    kernel("correct", 0.9)])
    s = run(tmp_path, client, seeds=3, rounds=0)
    assert s.best_speedup == pytest.approx(3.0) and s.best_reduced_precision is True
    assert s.best_speedup_full_precision == pytest.approx(1.2)
    assert "reduced_precision" in s.flags
