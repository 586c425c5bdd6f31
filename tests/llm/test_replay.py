from __future__ import annotations

import json

import pytest

from kernelskill.errors import KernelSkillError
from kernelskill.llm import Message, make_client
from kernelskill.llm.scripted import ReplayClient, ReplayExhausted, ReplayMismatch

from .conftest import ask


def write_jsonl(path, entries):
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    return path


def test_replays_in_order_then_errors_clearly(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [
        {"reply": "first", "usage": {"input_tokens": 5, "output_tokens": 2}, "note": "written by hand"},
        {"reply": "second"},
    ])
    client = make_client(f"replay:{path}")
    one, two = client.complete(ask()), client.complete(ask())
    assert (one.text, two.text) == ("first", "second")
    assert one.usage.input_tokens == 5 and not one.usage.estimated and two.usage.estimated
    assert one.cost_usd is None and one.model == f"replay:{path}"
    with pytest.raises(ReplayExhausted) as info:
        client.complete(ask())
    assert "2 of 2 served" in str(info.value) and "more LLM calls" in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("wrap", [lambda e: e, lambda e: {"note": "hand-written", "entries": e}])
def test_json_documents(tmp_path, wrap):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(wrap([{"reply": "a"}, {"reply": "b"}]), indent=2))
    client = ReplayClient(path)
    assert [client.complete(ask()).text for _ in range(2)] == ["a", "b"]


def test_unused_replies_are_reported(tmp_path):
    client = ReplayClient(write_jsonl(tmp_path / "t.jsonl", [{"reply": "a"}, {"reply": "b"}]))
    client.complete(ask())
    with pytest.raises(ReplayMismatch, match="used only 1"):
        client.check_consumed()
    client.complete(ask())
    client.check_consumed()


def test_strict_mode_compares_messages(tmp_path):
    recorded = [m.model_dump() for m in ask("recorded prompt")]
    client = ReplayClient(write_jsonl(tmp_path / "t.jsonl", [{"reply": "a", "messages": recorded}] * 2), strict=True)
    assert client.complete(ask("recorded prompt")).text == "a"
    with pytest.raises(ReplayMismatch, match="message 2 \\(user\\) differs"):
        client.complete(ask("another prompt"))


@pytest.mark.parametrize("content, match", [
    ('{"reply": "a"}\n{broken\n', "line 2: not valid JSON"),
    ('{"reply": "a"}\n{"text": "b"}\n', "line 2: reply: Field required"),
    ('{"entries": 3}', "expected a list"),
    ("", "holds no entries"),
])
def test_bad_transcripts_name_the_place(tmp_path, content, match):
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    with pytest.raises(KernelSkillError, match=match):
        ReplayClient(path)


def test_missing_file(tmp_path):
    with pytest.raises(KernelSkillError, match="cannot read replay transcript"):
        make_client(f"replay:{tmp_path / 'nope.jsonl'}")
    with pytest.raises(KernelSkillError, match="needs a transcript path"):
        make_client("replay:")


def test_messages_round_trip_through_a_transcript(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [{"reply": "r", "messages": [{"role": "user", "content": "q"}]}])
    assert ReplayClient(path).entries[0].messages == [Message(role="user", content="q")]


def test_replay_serves_each_agent_its_own_replies(tmp_path):
    """Seeds are generated concurrently, so calls of different agents interleave differently from run to run; a
    transcript whose entries name their agent must serve each agent its replies in order regardless."""
    path = tmp_path / "t.jsonl"
    rows = [
        {"agent": "generator", "reply": "g1"},
        {"agent": "planner", "reply": "p1"},
        {"agent": "generator", "reply": "g2"},
        {"reply": "untagged"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    client = ReplayClient(path)
    assert client.complete(ask(), agent="planner").text == "p1"
    assert client.complete(ask(), agent="generator").text == "g1"
    assert client.complete(ask(), agent="generator").text == "g2"
    assert client.complete(ask(), agent="generator").text == "untagged"  # no generator entry left: untagged one
    with pytest.raises(ReplayExhausted, match="for the planner"):
        client.complete(ask(), agent="planner")
    client.check_consumed()


def test_replay_accepts_a_run_folder(tmp_path):
    write_jsonl(tmp_path / "transcript.jsonl", [{"agent": "generator", "reply": "from the run"}])
    client = make_client(f"replay:{tmp_path}")
    assert client.complete(ask(), agent="generator").text == "from the run"
