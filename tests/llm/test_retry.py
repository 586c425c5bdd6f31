from __future__ import annotations

import email.utils

import pytest

from kernelskill.llm.base import LLMAuthError, LLMRequestError, LLMUnavailable, Secret
from kernelskill.llm.retry import (
    Failure,
    RetryPolicy,
    backoff_delay,
    call_with_retries,
    kind_of_status,
    parse_retry_after,
)


def test_parse_retry_after_forms():
    assert parse_retry_after({"Retry-After": "12"}) == 12.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "300"}) == 0.3
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=1_000_000) == pytest.approx(30.0)
    assert parse_retry_after({"Retry-After": date}, now=2_000_000) == 0.0  # in the past: retry now


def test_status_kinds():
    assert [kind_of_status(s) for s in (401, 403, 429, 408, 500, 503, 529, 400, 404, 422)] == [
        "auth", "auth", "transient", "transient", "transient", "transient", "transient", "fatal", "fatal", "fatal",
    ]


def test_full_jitter_bounds_and_caps():
    p = RetryPolicy(base_delay_s=2.0, max_delay_s=10.0)
    assert [backoff_delay(n, p, None, lambda: 1.0) for n in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 10.0]
    assert backoff_delay(3, p, None, lambda: 0.0) == 0.0
    assert backoff_delay(1, p, 3.0, lambda: 1.0) == 3.0  # Retry-After wins over the jitter
    assert backoff_delay(1, p, 500.0, lambda: 1.0) == 10.0  # but is capped


class Boom(Exception):
    pass


def classify(exc):
    return exc.args[0] if isinstance(exc, Boom) else None


THREE = RetryPolicy(max_attempts=3)


def run(failures, policy=THREE, secret=None):
    sent, sleeps = [], []

    def send():
        sent.append(1)
        if failures:
            raise Boom(failures.pop(0))
        return "ok"

    def auth(f):
        return LLMAuthError(f"set X_KEY ({f.status})", env_var="X_KEY")

    result = call_with_retries(send, classify=classify, policy=policy, auth_error=auth, what="m", secret=secret,
                               sleep=sleeps.append, rng=lambda: 1.0)
    return result, len(sent), sleeps


def test_succeeds_after_transient_failures():
    (result, attempts), sent, sleeps = run([Failure("transient", "e"), Failure("transient", "e")])
    assert (result, attempts, sent, sleeps) == ("ok", 3, 3, [1.0, 2.0])


def test_auth_and_fatal_stop_at_once():
    with pytest.raises(LLMAuthError, match="X_KEY"):
        run([Failure("auth", "no", 401)])
    with pytest.raises(LLMRequestError):
        run([Failure("fatal", "bad", 400), Failure("fatal", "bad", 400)])


def test_unknown_exceptions_propagate_unchanged():
    def send():
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        call_with_retries(send, classify=lambda e: None, policy=RetryPolicy(), auth_error=None, what="m",
                          sleep=lambda s: pytest.fail("must not sleep"))


def test_exhaustion_redacts_the_key_from_the_last_error():
    secret = Secret("sk-SECRET")
    with pytest.raises(LLMUnavailable) as info:
        run([Failure("transient", "echo sk-SECRET")] * 3, secret=secret)
    assert "sk-SECRET" not in str(info.value) and "sk-SECRET" not in info.value.last_error
    assert info.value.attempts == 3 and "***" in info.value.last_error
    assert info.value.__cause__ is None and info.value.__suppress_context__
