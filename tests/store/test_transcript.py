"""Exporting a task's LLM calls as a replay transcript that `replay:PATH` serves back."""

from __future__ import annotations

import json

from kernelskill.llm.base import Message
from kernelskill.llm.scripted import ReplayClient, load_transcript

from .conftest import llm_call


def record(store, run_id, task_id):
    """Calls in the order concurrent seeds and later rounds might record them, plus some to leave out."""
    def call(round_idx, slot, agent, reply, **kw):
        messages = [{"role": "user", "content": f"{agent} r{round_idx} s{slot} a{kw.get('attempt', 1)}"}]
        store.add_llm_call(**llm_call(run_id, task_id, round_idx=round_idx, slot=slot, agent=agent, reply=reply,
                                      messages=messages, **kw))

    call(1, 0, "planner", "plan 1")
    call(0, 1, "generator", "seed 1")  # seeds finish in any order
    call(0, 0, "generator", "seed 0 bad")
    call(0, 0, "generator", "seed 0 fixed", attempt=2, tokens_estimated=True)
    call(0, 2, "generator", None, error="HTTP 500")  # failed: not exported
    call(1, 0, "coder", "code 1")
    store.add_llm_call(**llm_call(run_id, None, agent="curator", reply="not this task's"))


def test_export_order_and_shape(store, task, tmp_path):
    run_id, task_id = task
    record(store, run_id, task_id)
    path = tmp_path / "out" / "transcript.jsonl"
    assert store.export_transcript(task_id, path) == 5

    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["round"], e["slot"], e["reply"]) for e in entries] == [
        (0, 0, "seed 0 bad"), (0, 0, "seed 0 fixed"), (0, 1, "seed 1"), (1, 0, "plan 1"), (1, 0, "code 1")]
    assert entries[0]["note"] == f"recorded by kernelskill from run {store.run_dir}, task 19_ReLU"
    assert all("note" not in e for e in entries[1:])
    assert entries[1] == {
        "agent": "generator", "round": 0, "slot": 0, "attempt": 2, "reply": "seed 0 fixed",
        "usage": {"input_tokens": 100, "output_tokens": 20, "estimated": True},
        "messages": [{"role": "user", "content": "generator r0 s0 a2"}],
    }


def test_export_round_trips_through_the_replay_loader(store, task, tmp_path):
    run_id, task_id = task
    record(store, run_id, task_id)
    path = tmp_path / "transcript.jsonl"
    store.export_transcript(task_id, path)

    loaded = load_transcript(path)
    assert [(e.agent, e.reply) for e in loaded] == [
        ("generator", "seed 0 bad"), ("generator", "seed 0 fixed"), ("generator", "seed 1"), ("planner", "plan 1"),
        ("coder", "code 1")]
    assert loaded[1].usage.estimated and loaded[0].messages == [Message(role="user", content="generator r0 s0 a1")]

    # served back per agent, in recorded order, with the recorded messages (strict mode checks them)
    client = ReplayClient(path, strict=True)

    def ask(text: str, agent: str) -> str:
        return client.complete([Message(role="user", content=text)], agent=agent).text

    assert ask("planner r1 s0 a1", "planner") == "plan 1"
    assert ask("generator r0 s0 a1", "generator") == "seed 0 bad"
    assert ask("coder r1 s0 a1", "coder") == "code 1"
    assert ask("generator r0 s0 a2", "generator") == "seed 0 fixed"
    assert ask("generator r0 s1 a1", "generator") == "seed 1"
    client.check_consumed()


def test_export_of_a_task_without_replies(store, task, tmp_path):
    run_id, task_id = task
    store.add_llm_call(**llm_call(run_id, task_id, reply=None, error="HTTP 401"))
    path = tmp_path / "empty.jsonl"
    assert store.export_transcript(task_id, path) == 0
    assert path.read_text() == ""


def test_export_leaves_out_the_calls_of_abandoned_rounds(store, task, tmp_path):
    """A killed round is redone on resume with the same prompts: a replay of the whole run must get each reply once."""
    run_id, task_id = task
    killed = store.start_round(task_id, 1, "optimize")
    store.add_llm_call(**llm_call(run_id, task_id, round_id=killed, reply="plan, first try"))
    store.abandon_unfinished_rounds(task_id)
    redone = store.start_round(task_id, 1, "optimize")
    store.add_llm_call(**llm_call(run_id, task_id, round_id=redone, reply="plan, redone"))
    store.finish_round(redone, "done", state={})
    store.add_llm_call(**llm_call(run_id, task_id, round_id=None, round_idx=None, reply="no round"))
    path = tmp_path / "t.jsonl"
    assert store.export_transcript(task_id, path) == 2
    assert [e.reply for e in load_transcript(path)] == ["no round", "plan, redone"]
