"""The real `openai` SDK against a scripted local server, through make_client(..., base_url=...)."""

from __future__ import annotations

import pytest

from kernelskill.errors import ExitCode
from kernelskill.llm import (
    LLMAuthError,
    LLMRequestError,
    LLMUnavailable,
    RetryPolicy,
    make_client,
)

from .conftest import KEY, ask
from kernelskill.llm.local_server import Reply, error, openai_ok


def client(server, sleeps, policy, *, env=None, rng=lambda: 0.5, timeout_s=10.0, model="openai/test-model"):
    env = {"OPENAI_API_KEY": KEY} if env is None else env
    return make_client(model, server.openai_url, env=env, retry=policy, sleep=sleeps, rng=rng, timeout_s=timeout_s)


def test_reply_and_usage_come_through(server, sleeps, policy):
    server.add(openai_ok("```python\nprint(1)\n```", prompt_tokens=21, completion_tokens=9))
    c = client(server, sleeps, policy)
    out = c.complete(ask("make it fast"), max_tokens=123, temperature=0.2)
    assert out.text == "```python\nprint(1)\n```"
    assert (out.usage.input_tokens, out.usage.output_tokens, out.usage.estimated) == (21, 9, False)
    assert out.model == "openai/test-model" and out.attempts == 1 and out.latency_s > 0
    assert out.cost_usd is None  # a local endpoint is never priced
    assert sleeps.delays == []
    (req,) = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body["model"] == "test-model"
    assert req.body["messages"] == [
        {"role": "system", "content": "You write GPU kernels."},
        {"role": "user", "content": "make it fast"},
    ]
    assert req.body["max_tokens"] == 123 and req.body["temperature"] == 0.2
    assert server.overruns == 0


def test_429_with_retry_after_is_retried_after_the_servers_delay(server, sleeps, policy):
    server.add(error(429, "slow down", headers={"Retry-After": "7"}), openai_ok("ok"))
    out = client(server, sleeps, policy).complete(ask())
    assert out.text == "ok" and out.attempts == 2
    assert sleeps.delays == [7.0]  # Retry-After honoured, not the jittered backoff
    assert len(server.requests) == 2  # the SDK's own retries are off: only ours happen


def test_retry_after_ms_is_preferred(server, sleeps, policy):
    server.add(error(429, headers={"retry-after-ms": "250", "Retry-After": "9"}), openai_ok("ok"))
    assert client(server, sleeps, policy).complete(ask()).attempts == 2
    assert sleeps.delays == [0.25]


def test_500_then_success_backs_off_with_jitter(server, sleeps, policy):
    server.add(error(500, "boom"), error(502, "bad gateway"), openai_ok("fine"))
    out = client(server, sleeps, policy, rng=lambda: 0.5).complete(ask())
    assert out.text == "fine" and out.attempts == 3
    assert sleeps.delays == [0.5, 1.0]  # rng · base · 2^(n-1)


def test_malformed_json_is_retried(server, sleeps, policy):
    server.add(Reply(body="{this is not json"), openai_ok("parsed"))
    out = client(server, sleeps, policy).complete(ask())
    assert out.text == "parsed" and out.attempts == 2


def test_slow_reply_past_the_timeout_is_retried(server, sleeps, policy):
    server.add(Reply(delay_s=5.0, body={}), openai_ok("in time"))
    out = client(server, sleeps, policy, timeout_s=0.3).complete(ask())
    assert out.text == "in time" and out.attempts == 2
    assert len(sleeps.delays) == 1


def test_timeouts_exhaust_the_retries(server, sleeps):
    server.add(Reply(delay_s=5.0), Reply(delay_s=5.0))
    c = client(server, sleeps, RetryPolicy(max_attempts=2, base_delay_s=0.1), timeout_s=0.2)
    with pytest.raises(LLMUnavailable) as info:
        c.complete(ask())
    assert info.value.attempts == 2 and "Timeout" in info.value.last_error


def test_retries_are_bounded(server, sleeps):
    server.add(*[error(503, "overloaded")] * 3)
    c = client(server, sleeps, RetryPolicy(max_attempts=3, base_delay_s=1.0), rng=lambda: 1.0)
    with pytest.raises(LLMUnavailable) as info:
        c.complete(ask())
    assert info.value.attempts == 3 and len(server.requests) == 3
    assert sleeps.delays == [1.0, 2.0]  # exponential, no sleep after the last attempt
    assert "503" in str(info.value) and info.value.exit_code == ExitCode.NO_MODEL
    assert server.overruns == 0


def test_auth_error_stops_at_once_and_names_the_variable(server, sleeps, policy):
    server.add(error(401, "invalid key"), openai_ok("never sent"))
    with pytest.raises(LLMAuthError) as info:
        client(server, sleeps, policy).complete(ask())
    assert "OPENAI_API_KEY" in str(info.value) and info.value.env_var == "OPENAI_API_KEY"
    assert info.value.exit_code == ExitCode.NO_MODEL
    assert len(server.requests) == 1 and sleeps.delays == []


def test_403_is_an_auth_error_too(server, sleeps, policy):
    server.add(error(403, "forbidden"))
    with pytest.raises(LLMAuthError):
        client(server, sleeps, policy).complete(ask())
    assert len(server.requests) == 1


def test_bad_request_is_not_retried(server, sleeps, policy):
    server.add(error(400, "model 'nope' does not exist"))
    with pytest.raises(LLMRequestError) as info:
        client(server, sleeps, policy).complete(ask())
    assert info.value.status == 400 and "does not exist" in str(info.value)
    assert len(server.requests) == 1 and sleeps.delays == []


def test_local_server_needs_no_key(server, sleeps, policy):
    server.add(openai_ok("local"))
    out = client(server, sleeps, policy, env={}).complete(ask())
    assert out.text == "local"
    assert server.requests[0].headers["authorization"].startswith("Bearer ")  # a placeholder, never a real key


def test_local_server_that_wants_a_key_says_which_variable(server, sleeps, policy):
    server.add(error(401, "key required"))
    with pytest.raises(LLMAuthError, match="OPENAI_API_KEY is not set"):
        client(server, sleeps, policy, env={}).complete(ask())


def test_openai_base_url_from_the_environment(server, sleeps, policy):
    server.add(openai_ok("via env"))
    c = make_client("openai/m", env={"OPENAI_BASE_URL": server.openai_url}, sleep=sleeps, retry=policy)
    assert c.complete(ask()).text == "via env"


def test_missing_usage_is_estimated_and_labelled(server, sleeps, policy):
    server.add(openai_ok("x" * 40, usage=False))
    out = client(server, sleeps, policy).complete(ask())
    assert out.usage.estimated and out.usage.output_tokens == 10 and out.usage.input_tokens > 0


def test_model_names_with_slashes_are_passed_whole(server, sleeps, policy):
    server.add(openai_ok("ok"))
    client(server, sleeps, policy, model="openai/Qwen/Qwen2.5-Coder-7B").complete(ask())
    assert server.requests[0].body["model"] == "Qwen/Qwen2.5-Coder-7B"
