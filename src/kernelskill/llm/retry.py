"""Bounded retries with exponential backoff and full jitter.

Only transient failures are retried: rate limits (429), server errors (5xx, including Anthropic's 529 "overloaded"),
request timeouts (408), client-side timeouts, dropped connections and garbled responses. An authentication error
(401/403) stops at once; anything else the provider refused (400, 404 …) stops at once too, since sending it again
cannot help. The SDKs' own retries are switched off (max_retries=0) so these are the only ones and are counted.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from kernelskill.llm.base import LLMAuthError, LLMRequestError, LLMUnavailable, Secret
from kernelskill.redact import redact_text

log = logging.getLogger("kernelskill.llm")
T = TypeVar("T")
Kind = Literal["transient", "auth", "fatal"]


class RetryPolicy(BaseModel):
    """How hard to try. Delay before retry n (n = 1, 2 …) is uniform in [0, min(max_delay_s, base_delay_s·2^(n-1))],
    or the server's Retry-After when it sent one (capped at max_delay_s)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(5, ge=1, le=50, description="requests in all, the first one included")
    base_delay_s: float = Field(1.0, ge=0)
    max_delay_s: float = Field(60.0, ge=0)


@dataclass(frozen=True)
class Failure:
    """What went wrong with one request, in provider-neutral terms."""

    kind: Kind
    description: str  # type and message; may contain a key until redacted
    status: int | None = None
    retry_after_s: float | None = None


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` (OpenAI) or `Retry-After` (seconds or an HTTP date); None if absent."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    if (ms := lower.get("retry-after-ms")) is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def kind_of_status(status: int) -> Kind:
    if status in (401, 403):
        return "auth"
    if status in (408, 409, 429) or status >= 500:
        return "transient"
    return "fatal"


def classify_sdk_error(exc: BaseException, sdk: ModuleType) -> Failure | None:
    """Classify an exception raised by the `openai` or `anthropic` SDK (both share one error hierarchy).

    Returns None for exceptions that are not the provider's doing; those are bugs and propagate unchanged.
    """
    description = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, sdk.APIStatusError):
        headers = getattr(exc.response, "headers", None)
        return Failure(kind_of_status(exc.status_code), description, exc.status_code, parse_retry_after(headers))
    if isinstance(exc, sdk.APIConnectionError):  # includes APITimeoutError
        return Failure("transient", description)
    if isinstance(exc, (sdk.APIResponseValidationError, json.JSONDecodeError)):
        return Failure("transient", description)  # a garbled body is the server's fault; it may not recur
    return None


def backoff_delay(retry: int, policy: RetryPolicy, retry_after_s: float | None, rng: Callable[[], float]) -> float:
    """Seconds to sleep before retry number `retry` (1-based)."""
    if retry_after_s is not None:
        return min(retry_after_s, policy.max_delay_s)
    return rng() * min(policy.max_delay_s, policy.base_delay_s * 2 ** (retry - 1))


def call_with_retries(
    send: Callable[[], T],
    *,
    classify: Callable[[BaseException], Failure | None],
    policy: RetryPolicy,
    auth_error: Callable[[Failure], LLMAuthError],
    what: str,
    secret: Secret | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
) -> tuple[T, int]:
    """Run `send` until it succeeds or the policy gives up. Returns (result, attempts).

    `what` names the endpoint in messages ("openai/gpt-4o at https://…"). Error text passes through
    `secret.redact` before it reaches a log line or an exception.
    """
    redact = secret.redact if secret is not None else (lambda s: s)
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return send(), attempt
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
        safe = redact_text(redact(failure.description))  # the key, and credentials in any URL quoted
        if failure.kind == "auth":
            raise auth_error(failure) from None  # `from None`: the SDK error may carry the key in its body
        if failure.kind == "fatal":
            raise LLMRequestError(f"{what} refused the request: {safe}", status=failure.status) from None
        if attempt == policy.max_attempts:
            raise LLMUnavailable(
                f"{what} failed {attempt} time(s) in a row; last error: {safe}", attempts=attempt, last_error=safe
            ) from None
        delay = backoff_delay(attempt, policy, failure.retry_after_s, rng)
        log.warning("%s: attempt %d/%d failed (%s); retrying in %.2fs", what, attempt, policy.max_attempts, safe, delay)
        sleep(delay)
    raise AssertionError("unreachable: the loop returns or raises")
