"""The prompt templates: they render for every agent, backend and device, hold the contract, keep the Reviewer's
feedback, and honour the ablation contract (switched-off memories leave no trace in the prompts)."""

from __future__ import annotations

import itertools
import re

import pytest

from kernelskill.agents import SECTIONS, ReviewFeedback, Team
from kernelskill.agents.render import (
    AGENTS,
    ERROR_CHARS,
    SECTION_BASE,
    SECTION_CONTRACT,
    SECTION_DECISION,
    SECTION_DIAGNOSIS,
    SECTION_FAILING,
    SECTION_FEEDBACK,
    SECTION_FREE_CHOICE,
    SECTION_GOAL,
    SECTION_METHOD,
    SECTION_METHODS,
    SECTION_OPT_MEMORY,
    SECTION_PLAN,
    SECTION_REPAIR_HISTORY,
    SECTION_REPLY,
    Prompts,
    bounded,
    codeblock,
)
from kernelskill.llm.scripted import FakeClient

from .conftest import (
    BAD,
    CANDIDATE,
    PROBLEM,
    a_diagnosis,
    an_attempt,
    optimize_context,
    plan_context,
    repair_context,
    task,
)

LEAKED_NONE = re.compile(r"(: None\b|`None`|\(None\)|None ms|Nonex|^None$)", re.MULTILINE)
BACKENDS_DEVICES = list(itertools.product(["triton", "cuda"], ["cuda", "cpu"]))


@pytest.fixture(scope="module")
def prompts():
    return Prompts()


def text(messages) -> str:
    return "\n".join(m.content for m in messages)


def every_prompt(prompts, kb, backend, device):
    """Each agent's prompt, with every optional section present, on the real knowledge base."""
    applicable = [m for m in kb.methods if m.cues.applicable(backend)]
    ctx = plan_context(kb, backend=backend, device=device, attempts=[an_attempt()])
    ctx = ctx.model_copy(update={"methods": applicable})
    llm_features = [f for f in kb.code_features if f.mode == "llm"]
    return {
        "generator": prompts.render("generator", task=task(backend, device), seed=2, seeds=3),
        "feature_extractor": prompts.render(
            "feature_extractor", source=CANDIDATE, features=llm_features, backend=backend
        ),
        "planner": prompts.render("planner", ctx=ctx),
        "optimizer": prompts.render("optimizer", ctx=optimize_context(kb, backend=backend, device=device)),
        "diagnoser": prompts.render("diagnoser", ctx=repair_context(backend=backend, device=device)),
        "repairer": prompts.render(
            "repairer", ctx=repair_context(backend=backend, device=device), diagnosis=a_diagnosis()
        ),
    }


@pytest.mark.parametrize(("backend", "device"), BACKENDS_DEVICES)
def test_every_agent_renders_for_every_backend_and_device(prompts, kb, backend, device):
    rendered = every_prompt(prompts, kb, backend, device)
    assert set(rendered) == set(AGENTS)
    for agent, messages in rendered.items():
        assert [m.role for m in messages] == ["system", "user"], agent
        body = text(messages)
        assert SECTION_REPLY in messages[1].content, agent
        assert not LEAKED_NONE.search(body), agent  # no unset value leaked into the text
        if agent != "feature_extractor":
            assert SECTION_CONTRACT in messages[0].content and PROBLEM.strip() in body, agent
            assert "class ModelNew(nn.Module)" in body
    planner = text(rendered["planner"])
    other = "cuda" if backend == "triton" else "triton"
    for method in [m for m in kb.methods if m.cues.applicable(backend)]:
        assert f"### `{method.id}`" in planner
        assert getattr(method.cues, backend).strip() in planner
        assert getattr(method.cues, other).strip() not in planner  # only the task's backend's cues


@pytest.mark.parametrize(("backend", "device"), BACKENDS_DEVICES)
def test_contract_matches_backend_and_device(prompts, backend, device):
    system = prompts.render("generator", task=task(backend, device), seed=1, seeds=1)[0].content
    assert ("@triton.jit" in system) == (backend == "triton")
    assert ("load_inline" in system) == (backend == "cuda")
    assert ("Triton's CPU interpreter" in system) == (backend == "triton" and device == "cpu")
    assert 'never hard-code `device="cuda"`' in system if (backend, device) == ("triton", "cpu") else True
    for rule in ("try`/`except", "name `Model`", "threading", "monkey-patching", "caching results across calls",
                 "sys._getframe", "policy:reruns-reference-ops"):  # fmt: skip
        assert rule in system, rule


def test_allowing_torch_ops_changes_the_contract(prompts):
    allowed = task().model_copy(update={"allow_torch_ops": True})
    system = prompts.render("generator", task=allowed, seed=1, seeds=1)[0].content
    assert "policy:reruns-reference-ops" not in system and "allows PyTorch operators" in system


# the ablation contract ----------------------------------------------------------------------------------------


def test_planner_without_long_term_memory_has_no_policy_and_no_cards(prompts, kb):
    body = text(prompts.render("planner", ctx=plan_context(kb, ltm=False)))
    assert SECTION_DECISION not in body and SECTION_METHODS not in body and "###" not in body
    assert SECTION_FREE_CHOICE in body and SECTION_OPT_MEMORY in body
    for method in kb.methods:
        assert method.intent not in body
    assert "knowledge base" not in body and "allowed method" not in body


def test_planner_with_long_term_memory_has_policy_and_cards(prompts, kb):
    body = text(prompts.render("planner", ctx=plan_context(kb)))
    assert SECTION_DECISION in body and SECTION_METHODS in body and SECTION_FREE_CHOICE not in body
    assert "`pointwise_memory_bound`" in body and "dram_throughput_pct = 85.0" in body
    assert kb.method("kernel_fusion").intent in body


def test_planner_sees_the_ranked_methods_with_gain_and_why(prompts, kb):
    from kernelskill.agents.context import RankedMethodBrief

    ctx = plan_context(kb)
    plain = text(prompts.render("planner", ctx=ctx))
    assert "- Allowed methods, in order of expected payoff: `kernel_fusion`, `vectorize_memory_access`" in plain
    ranked = [RankedMethodBrief(method="kernel_fusion", gain=3.0, why="three kernels stream the tensor"),
              RankedMethodBrief(method="vectorize_memory_access", gain=None, why="no gain rule applies"),
              RankedMethodBrief(method="warp_level_reduction", gain=1.5, why="a tree in shared memory")]  # fmt: skip
    ctx = ctx.model_copy(update={"decision": ctx.decision.model_copy(update={"ranked": ranked})})
    body = text(prompts.render("planner", ctx=ctx))
    assert "ranked (most promising first" in body and "Allowed methods, in order of expected payoff" not in body
    assert "  1. `kernel_fusion`: expected ~3x - three kernels stream the tensor\n" in body
    assert "  2. `vectorize_memory_access`: no estimate - no gain rule applies\n" in body
    assert "  3. `warp_level_reduction`: expected ~1.5x" in body


def test_planner_without_short_term_memory_has_no_optimization_memory(prompts, kb):
    body = text(prompts.render("planner", ctx=plan_context(kb, stm=False)))
    assert SECTION_OPT_MEMORY not in body and "what_differs" not in body


def test_planner_with_short_term_memory_shows_attempts_and_the_rule(prompts, kb):
    system, user = prompts.render("planner", ctx=plan_context(kb, attempts=[an_attempt()]))
    assert "what_differs" in system.content  # said up front
    assert SECTION_OPT_MEMORY in user.content and "`round-01`" in user.content and "fuse everything" in user.content
    empty = text(prompts.render("planner", ctx=plan_context(kb, attempts=[])))
    assert SECTION_OPT_MEMORY in empty and "Nothing has been tried" in empty


def test_planner_with_neither_memory(prompts, kb):
    body = text(prompts.render("planner", ctx=plan_context(kb, ltm=False, stm=False)))
    for heading in (SECTION_DECISION, SECTION_METHODS, SECTION_OPT_MEMORY):
        assert heading not in body
    assert SECTION_BASE in body and CANDIDATE.strip() in body


@pytest.mark.parametrize("agent", ["diagnoser", "repairer"])
def test_repair_prompts_without_a_chain_have_no_history(prompts, agent):
    extra = {"diagnosis": a_diagnosis()} if agent == "repairer" else {}
    without = text(prompts.render(agent, ctx=repair_context(chain=False), **extra))
    with_chain = text(prompts.render(agent, ctx=repair_context(chain=True), **extra))
    assert SECTION_REPAIR_HISTORY not in without and "round-02-r1" not in without
    assert SECTION_REPAIR_HISTORY in with_chain and "`round-02-r1`" in with_chain
    assert "still fails to compile: SyntaxError" in with_chain


# what each agent sees -----------------------------------------------------------------------------------------


def test_optimizer_sees_base_timing_plan_and_method_card(prompts, kb):
    body = text(prompts.render("optimizer", ctx=optimize_context(kb)))
    for heading in (SECTION_BASE, SECTION_PLAN, SECTION_METHOD):
        assert heading in body
    assert "1.80x" in body and "0.0117 ms" in body and "use 16-byte accesses" in body
    assert kb.method("vectorize_memory_access").cues.triton.strip() in body
    no_card = optimize_context(kb).model_copy(update={"method": None})
    assert SECTION_METHOD not in text(prompts.render("optimizer", ctx=no_card))


def test_diagnoser_sees_goal_only_when_set(prompts):
    assert SECTION_GOAL in text(prompts.render("diagnoser", ctx=repair_context(goal="vectorize loads")))
    body = text(prompts.render("diagnoser", ctx=repair_context(goal=None)))
    assert SECTION_GOAL not in body and SECTION_FAILING in body and SECTION_FEEDBACK in body


def test_repairer_sees_the_diagnosis(prompts):
    body = text(prompts.render("repairer", ctx=repair_context(chain=False), diagnosis=a_diagnosis()))
    assert SECTION_DIAGNOSIS in body and "missing colon" in body and "add ':'" in body


def test_feedback_is_shown_in_full_when_it_fits(prompts):
    error = "\n".join(f"error line {i}: expected ';'" for i in range(100))
    feedback = BAD.model_copy(update={"error": error, "checks": ["static:try-fallback: line 3: try/except"],
                                      "flags": ["degenerate_output"]})  # fmt: skip
    ctx = repair_context(chain=False).model_copy(update={"feedback": feedback})
    body = text(prompts.render("diagnoser", ctx=ctx))
    assert error in body and "static:try-fallback: line 3" in body and "degenerate_output" in body
    assert "FAILED in stage `compile` (compile_error)" in body and "Traceback ..." in body


def test_long_feedback_is_bounded_never_dropped(prompts):
    error = "FIRST ERROR here\n" + "x" * 50_000 + "\nLAST LINE: mismatch at [3, 7]"
    ctx = repair_context(chain=False).model_copy(update={"feedback": BAD.model_copy(update={"error": error})})
    body = text(prompts.render("diagnoser", ctx=ctx))
    assert "FIRST ERROR here" in body and "LAST LINE: mismatch at [3, 7]" in body
    assert "characters cut here" in body and len(body) < 30_000


def test_bounded_and_codeblock():
    assert bounded("short", 100) == "short"
    cut = bounded("a" * 100 + "b" * 10_000 + "c" * 100, ERROR_CHARS)
    assert cut.startswith("a" * 100) and cut.endswith("c" * 100) and len(cut) < ERROR_CHARS + 100
    assert codeblock("print(1)", "python") == "```python\nprint(1)\n```"
    assert codeblock("s = '```'\n", "python").startswith("````python\n")


def test_correct_feedback_without_timing(prompts, kb):
    ctx = optimize_context(kb).model_copy(update={"base_feedback": ReviewFeedback(correct=True)})
    assert "Verdict: correct." in text(prompts.render("optimizer", ctx=ctx))


def test_section_headings_are_distinct_and_not_prefixes_of_each_other():
    headings = list(SECTIONS.values())
    assert len(set(headings)) == len(headings)
    for a, b in itertools.permutations(headings, 2):
        assert not b.startswith(a), (a, b)


def test_unknown_agent_and_missing_variables_are_errors(prompts):
    with pytest.raises(ValueError, match="unknown agent"):
        prompts.render("critic", ctx=None)
    import jinja2

    with pytest.raises(jinja2.UndefinedError):
        prompts.render("generator", task=task(), seed=1)  # seeds missing


def test_team_render_is_the_prompt_sent(kb):
    client = FakeClient(['{"features": {"redundant_work": true}}'])
    team = Team(client)
    specs = [f for f in kb.code_features if f.mode == "llm"]
    team.extract_features(CANDIDATE, specs, "cuda")
    assert client.calls[0] == team.render("feature_extractor", source=CANDIDATE, features=specs, backend="cuda")


def test_decision_without_a_matched_case(prompts, kb):
    ctx = plan_context(kb)
    decision = ctx.decision.model_copy(update={"case": None, "tier": None, "forbidden_methods": [], "caveats": []})
    body = text(prompts.render("planner", ctx=ctx.model_copy(update={"decision": decision})))
    assert "Matched case: none" in body and "Forbidden here" not in body and "Caveats" not in body
