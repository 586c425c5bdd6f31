"""The real `anthropic` SDK against the scripted local server."""

from __future__ import annotations

import pytest

from kernelskill.llm import LLMAuthError, LLMUnavailable, RetryPolicy, make_client

from .conftest import ANTHROPIC_KEY, ask
from kernelskill.llm.local_server import anthropic_ok, error


def client(server, sleeps, policy, env=None):
    env = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY} if env is None else env
    return make_client("anthropic/claude-test", server.root, env=env, retry=policy, sleep=sleeps, rng=lambda: 0.5)


def test_reply_usage_and_system_prompt(server, sleeps, policy):
    server.add(anthropic_ok("```json\n{}\n```", input_tokens=30, output_tokens=4))
    out = client(server, sleeps, policy).complete(ask("plan"), max_tokens=77, temperature=0.0)
    assert out.text == "```json\n{}\n```" and out.attempts == 1
    assert (out.usage.input_tokens, out.usage.output_tokens) == (30, 4)
    assert out.model == "anthropic/claude-test" and out.cost_usd is None
    (req,) = server.requests
    assert req.path == "/v1/messages"
    # this SDK generation sends the key as a bearer token; older ones used x-api-key
    sent = (req.headers.get("x-api-key", ""), req.headers.get("authorization", "").removeprefix("Bearer "))
    assert ANTHROPIC_KEY in sent
    assert req.body["model"] == "claude-test" and req.body["max_tokens"] == 77
    assert req.body["system"] == "You write GPU kernels."
    assert req.body["messages"] == [{"role": "user", "content": "plan"}]
    assert req.body["temperature"] == 0.0


def test_429_then_overloaded_then_success(server, sleeps, policy):
    server.add(error(429, headers={"retry-after": "3"}), error(529, "overloaded"), anthropic_ok("done"))
    out = client(server, sleeps, policy).complete(ask())
    assert out.text == "done" and out.attempts == 3
    assert sleeps.delays == [3.0, 1.0]
    assert len(server.requests) == 3


def test_auth_error_names_the_variable(server, sleeps, policy):
    server.add(error(401, "invalid x-api-key"))
    with pytest.raises(LLMAuthError, match="ANTHROPIC_API_KEY"):
        client(server, sleeps, policy).complete(ask())
    assert len(server.requests) == 1 and sleeps.delays == []


def test_bounded(server, sleeps):
    server.add(error(500), error(500))
    with pytest.raises(LLMUnavailable) as info:
        client(server, sleeps, RetryPolicy(max_attempts=2)).complete(ask())
    assert info.value.attempts == 2 and len(server.requests) == 2


def test_missing_key_without_base_url():
    with pytest.raises(LLMAuthError, match="ANTHROPIC_API_KEY is not set"):
        make_client("anthropic/claude-test", env={})
