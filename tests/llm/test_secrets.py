"""Keys never appear in logs, reprs, exceptions or completions, even when a server echoes them back."""

from __future__ import annotations

import logging

import pytest

from kernelskill.llm import Budget, Ledger, LLMError, MeteredClient, RetryPolicy, make_client
from kernelskill.llm.base import Secret
from kernelskill.llm.registry import _LOCAL_PLACEHOLDER_KEY

from .conftest import ANTHROPIC_KEY, KEY, ask
from kernelskill.llm.local_server import Reply, anthropic_ok, openai_ok

LOGGERS = ("", "kernelskill", "openai", "anthropic", "httpx", "httpx2", "httpcore", "httpcore2")


def echo(status):
    return Reply(status=status, echo_key=True)


def exercise(client, produced, calls=4):
    """Run `client` through success, retries, exhaustion and an auth failure; collect everything it produced."""
    produced.append(repr(client))
    for _ in range(calls):
        try:
            completion = client.complete(ask())
            produced += [completion.model_dump_json(), repr(completion)]
        except LLMError as exc:
            produced += [str(exc), repr(exc), repr(exc.args), repr(vars(exc))]
            assert exc.__cause__ is None  # the SDK exception (with the echoed body) is not chained
    produced.append(repr(client))


@pytest.fixture
def debug_logs(caplog):
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name or None)
    return caplog


def check(produced, debug_logs, capsys, *secrets):
    captured = capsys.readouterr()
    everything = "\n".join(produced + [debug_logs.text, captured.out, captured.err])
    assert "retrying" in debug_logs.text  # the logs really were captured
    for secret in secrets:
        assert secret not in everything


def test_openai_key_never_appears(server, debug_logs, capsys):
    server.add(
        openai_ok("one"),
        echo(429), echo(500), openai_ok("two"),
        echo(503), echo(503), echo(503),
        echo(401),
    )
    client = make_client("openai/m", server.openai_url, env={"OPENAI_API_KEY": KEY},
                         retry=RetryPolicy(max_attempts=3), sleep=lambda s: None)
    metered = MeteredClient(client, Ledger(Budget(max_tokens=10_000)))
    produced: list[str] = []
    exercise(metered, produced)
    produced += [repr(metered), repr(metered.ledger), *(r.model_dump_json() for r in metered.ledger.records)]
    assert any(KEY in r.headers.get("authorization", "") for r in server.requests)  # the key was really used
    assert any("***" in p for p in produced) and "***" in debug_logs.text  # echoed copies were redacted
    assert server.overruns == 0
    check(produced, debug_logs, capsys, KEY)


def test_anthropic_key_never_appears(server, debug_logs, capsys):
    server.add(anthropic_ok("one"), echo(529), anthropic_ok("two"), echo(500), echo(500), echo(403))
    client = make_client("anthropic/c", server.root, env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY},
                         retry=RetryPolicy(max_attempts=2), sleep=lambda s: None)
    produced: list[str] = []
    exercise(client, produced)
    assert server.overruns == 0 and "***" in debug_logs.text
    check(produced, debug_logs, capsys, ANTHROPIC_KEY)


def test_local_placeholder_key_is_not_logged(server, debug_logs, capsys):
    server.add(echo(500), openai_ok("ok"), echo(401))
    client = make_client("openai/m", server.openai_url, env={}, sleep=lambda s: None)
    produced: list[str] = []
    exercise(client, produced, calls=2)
    assert server.overruns == 0
    assert _LOCAL_PLACEHOLDER_KEY in server.requests[0].headers["authorization"]
    check(produced, debug_logs, capsys, _LOCAL_PLACEHOLDER_KEY)


def test_secret_repr():
    s = Secret("sk-abc")
    assert "sk-abc" not in repr(s) + str(s) + f"{s}" and s.reveal() == "sk-abc"
    assert s.redact("key sk-abc echoed") == "key *** echoed"
