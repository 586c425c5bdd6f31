"""The Team: each agent's happy path, the re-ask, failures, the Planner's rules and the events it reports."""

from __future__ import annotations

import pytest

from kernelskill.agents import (
    AgentFailure,
    Diagnosis,
    LLMCallEvent,
    LLMFeatureJudge,
    Plan,
    Team,
)
from kernelskill.agents.render import SECTION_REPLY
from kernelskill.llm.base import BudgetExceeded, Completion, LLMUnavailable, Usage
from kernelskill.llm.scripted import FakeClient
from kernelskill.memory.features.codeview import build_view
from kernelskill.memory.features.extract import extract_features

from .conftest import (
    CANDIDATE,
    DIAGNOSIS_JSON,
    a_diagnosis,
    an_attempt,
    code_reply,
    optimize_context,
    plan_context,
    plan_reply,
    repair_context,
    task,
)


def make_team(replies, **kwargs):
    client = FakeClient(replies)
    events: list[LLMCallEvent] = []
    return Team(client, on_call=events.append, **kwargs), client, events


class RecordingClient:
    """A stub client that records the keyword arguments of every call."""

    model = "stub:"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.kwargs: list[dict] = []

    def complete(self, messages, **kwargs):
        self.kwargs.append(kwargs)
        return Completion(text=self.reply, usage=Usage(), model=self.model, latency_s=0.0)


# happy paths --------------------------------------------------------------------------------------------------


def test_generate_returns_the_candidate_and_reports_one_event():
    team, client, events = make_team([code_reply()])
    assert team.generate(task(), seed=2, seeds=3, tag={"round": 0, "slot": 2}) == CANDIDATE
    assert len(client.calls) == 1 and [m.role for m in client.calls[0]] == ["system", "user"]
    assert "attempt 2 of 3" in client.calls[0][1].content
    (event,) = events
    assert (event.agent, event.attempt, event.error, event.tag) == ("generator", 1, None, {"round": 0, "slot": 2})
    assert event.completion is not None and event.completion.text == code_reply()
    assert event.messages == client.calls[0]


def test_seeds_are_asked_for_different_approaches():
    team, client, _ = make_team([code_reply()] * 3)
    for seed in (1, 2, 3):
        team.generate(task(), seed=seed, seeds=3)
    prompts = {calls[1].content for calls in client.calls}
    assert len(prompts) == 3
    with pytest.raises(ValueError):
        team.generate(task(), seed=0, seeds=3)


def test_extract_features_asks_only_llm_features_in_one_call(kb):
    reply = '```json\n{"features": {"uncoalesced_pattern": false, "divergent_branches": "no", "pointwise": true, ' \
            '"made_up": 1}, "reasons": {}}\n```'  # fmt: skip
    team, client, events = make_team([reply])
    answers = team.extract_features(CANDIDATE, kb.code_features, "triton")
    assert answers == {"uncoalesced_pattern": False, "divergent_branches": "no"}  # rule features and unknown dropped
    assert len(client.calls) == 1 and events[0].agent == "feature_extractor"
    prompt = client.calls[0][1].content
    assert "`redundant_work`" in prompt and "`pointwise`" not in prompt


def test_extract_features_without_llm_features_makes_no_call(kb):
    team, client, _ = make_team([])
    assert team.extract_features(CANDIDATE, [f for f in kb.code_features if f.mode == "rule"], "triton") == {}
    assert client.calls == []


def test_feature_judge_feeds_the_memory_layer(kb):
    judge = LLMFeatureJudge({"uncoalesced_pattern": "false", "divergent_branches": "maybe"})
    specs = [kb.code_feature(i) for i in ("uncoalesced_pattern", "divergent_branches", "redundant_work")]
    values = extract_features(specs, build_view(CANDIDATE), judge)
    assert values["uncoalesced_pattern"].value is False and values["uncoalesced_pattern"].status == "ok"
    assert values["divergent_branches"].status == "unknown" and "maybe" in values["divergent_branches"].reason
    assert values["redundant_work"].status == "unknown"
    assert "gave no answer for `redundant_work`" in values["redundant_work"].reason
    with pytest.raises(KeyError):
        judge.judge_feature(specs[2], CANDIDATE)


def test_plan_happy_path(kb):
    team, _, events = make_team([plan_reply("vectorize_memory_access")])
    plan = team.plan(plan_context(kb), tag={"round": 3})
    assert isinstance(plan, Plan) and plan.method == "vectorize_memory_access"
    assert events[0].agent == "planner" and events[0].tag == {"round": 3}


def test_optimize_happy_path(kb):
    team, client, events = make_team([code_reply()])
    assert team.optimize(optimize_context(kb)) == CANDIDATE
    assert events[0].agent == "optimizer"
    assert "Keep offsets a contiguous tl.arange" in client.calls[0][1].content  # the method's Triton cue


def test_diagnose_and_repair_happy_paths():
    team, client, events = make_team([DIAGNOSIS_JSON, code_reply()])
    ctx = repair_context()
    diagnosis = team.diagnose(ctx)
    assert isinstance(diagnosis, Diagnosis) and diagnosis.root_cause == "missing colon on line 9"
    assert team.repair(ctx, diagnosis) == CANDIDATE
    assert [e.agent for e in events] == ["diagnoser", "repairer"]
    assert "missing colon on line 9" in client.calls[1][1].content  # the Repairer sees the diagnosis


# re-ask and failure -------------------------------------------------------------------------------------------


def test_malformed_reply_is_reasked_once_with_the_error():
    team, client, events = make_team(["I would write a kernel like this: ...", code_reply()])
    assert team.generate(task(), seed=1, seeds=1) == CANDIDATE
    assert len(client.calls) == 2 and [e.attempt for e in events] == [1, 2]
    first, second = client.calls
    assert second[:2] == first
    assert second[2].role == "assistant" and second[2].content == "I would write a kernel like this: ..."
    assert second[3].role == "user"
    assert "no ```python block found" in second[3].content and SECTION_REPLY in second[3].content
    assert events[1].messages == second


def test_two_malformed_replies_raise_agent_failure_with_both():
    team, _, events = make_team(["nothing", '```json\n{"critical_issue": "x"}\n```'])
    with pytest.raises(AgentFailure) as info:
        team.diagnose(repair_context())
    failure = info.value
    assert failure.agent == "diagnoser" and len(failure.errors) == 2
    assert "no ```json block found" in failure.errors[0]
    assert "missing field(s) `evidence`, `fix`, `root_cause`" in failure.errors[1]
    assert failure.replies == ["nothing", '```json\n{"critical_issue": "x"}\n```']
    assert len(events) == 2


def test_planner_method_outside_allowed_ids_is_reasked_with_the_list(kb):
    team, client, _ = make_team([plan_reply("tensor_cores"), plan_reply("kernel_fusion")])
    assert team.plan(plan_context(kb)).method == "kernel_fusion"
    reask = client.calls[1][-1].content
    assert "'tensor_cores'" in reask
    assert "kernel_fusion, vectorize_memory_access, warp_level_reduction" in reask


def test_planner_repeating_a_method_needs_what_differs(kb):
    ctx = plan_context(kb, attempts=[an_attempt("kernel_fusion")])
    team, client, _ = make_team([
        plan_reply("kernel_fusion"),
        plan_reply("kernel_fusion", what_differs="fuse the cast into the load this time"),
    ])  # fmt: skip
    plan = team.plan(ctx)
    assert plan.what_differs == "fuse the cast into the load this time"
    reask = client.calls[1][-1].content
    assert "already tried" in reask and "round-01" in reask and "what_differs" in reask


def test_planner_repeat_is_free_without_short_term_memory(kb):
    team, client, _ = make_team([plan_reply("kernel_fusion")])
    assert team.plan(plan_context(kb, stm=False)).method == "kernel_fusion"
    assert len(client.calls) == 1


@pytest.mark.parametrize("error", [
    LLMUnavailable("the provider is down", attempts=3, last_error="503"),
    BudgetExceeded("token budget spent", limit="max_tokens", spent=10, allowed=5),
])  # fmt: skip
def test_llm_errors_propagate_and_are_reported(error):
    team, _, events = make_team([error])
    with pytest.raises(type(error)) as info:
        team.generate(task(), seed=1, seeds=1, tag={"slot": 1})
    assert info.value is error
    (event,) = events
    assert event.completion is None and event.error == f"{type(error).__name__}: {error}"
    assert event.agent == "generator" and event.tag == {"slot": 1}


def test_llm_error_on_the_reask_propagates_too():
    team, _, events = make_team(["no code", LLMUnavailable("down", attempts=1, last_error="x")])
    with pytest.raises(LLMUnavailable):
        team.generate(task(), seed=1, seeds=1)
    assert [(e.attempt, e.error is None) for e in events] == [(1, True), (2, False)]


# what reaches the client --------------------------------------------------------------------------------------


def test_agent_name_and_settings_reach_the_client(kb):
    cases = [
        ("generator", code_reply(), lambda t: t.generate(task(), seed=1, seeds=2)),
        ("feature_extractor", '{"features": {"redundant_work": false}}',
         lambda t: t.extract_features(CANDIDATE, kb.code_features, "triton")),
        ("planner", plan_reply("kernel_fusion"), lambda t: t.plan(plan_context(kb))),
        ("optimizer", code_reply(), lambda t: t.optimize(optimize_context(kb))),
        ("diagnoser", DIAGNOSIS_JSON, lambda t: t.diagnose(repair_context())),
        ("repairer", code_reply(), lambda t: t.repair(repair_context(), a_diagnosis())),
    ]  # fmt: skip
    for agent, reply, call in cases:
        client = RecordingClient(reply)
        call(Team(client, max_tokens=1234, temperature=0.3))
        assert client.kwargs == [{"max_tokens": 1234, "temperature": 0.3, "agent": agent}]


def test_prompts_dir_overrides_a_template(tmp_path):
    (tmp_path / "generator.user.md.j2").write_text("Write `{{ task.name }}`, seed {{ seed }}.\n")
    team, client, _ = make_team([code_reply()], prompts_dir=tmp_path)
    team.generate(task(), seed=1, seeds=1)
    assert client.calls[0][1].content == "Write `gelu_chain`, seed 1.\n"
    assert "## Candidate contract" in client.calls[0][0].content  # the packaged system template still serves
