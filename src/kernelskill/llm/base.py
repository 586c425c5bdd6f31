"""The LLM client contract: messages in, a `Completion` out, and the errors a caller must handle.

Every provider (OpenAI-compatible, Anthropic, replay, fake) implements `LLMClient`. Agents depend only on this
module, so they run unchanged against a cloud model, a local server, a recorded transcript or a scripted fake.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from kernelskill.errors import ExitCode, KernelSkillError

Role = Literal["system", "user", "assistant"]


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    content: str


class Usage(BaseModel):
    """Tokens one call consumed, as the provider reported them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    # True when the server reported no usage and the counts were estimated from text length (~4 characters a token)
    # so that token budgets still bite; such counts are labelled, never passed off as reported.
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def estimate(cls, messages: list[Message], reply: str) -> Usage:
        """~4 characters a token, marked as estimated: for servers and transcripts that report no usage."""
        chars_in = sum(len(m.content) for m in messages)
        return cls(input_tokens=(chars_in + 3) // 4, output_tokens=(len(reply) + 3) // 4, estimated=True)


class Completion(BaseModel):
    """A model's reply to one `complete` call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    usage: Usage
    model: str  # the model as the caller named it, e.g. "openai/gpt-4o"
    latency_s: float = Field(ge=0, description="wall time of the call, retries and backoff included")
    cost_usd: float | None = Field(None, description="None when no price is known for the model: never a guess")
    attempts: int = Field(1, ge=1, description="requests sent; more than 1 means retries happened")


@runtime_checkable
class LLMClient(Protocol):
    """Anything that turns a list of messages into a `Completion`."""

    model: str

    def complete(
        self, messages: list[Message], *, max_tokens: int = 4096, temperature: float | None = None,
        agent: str | None = None,
    ) -> Completion:
        """Send `messages`; `temperature=None` leaves the provider's default. `agent` names the agent asking
        ("generator", "planner" …): providers ignore it; a replayed transcript serves each agent its own replies."""
        ...


class Secret:
    """An API key. Its repr and str never show the value; only `reveal()` does, at the point of use."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        """`text` with every occurrence of the key replaced (servers sometimes echo the key in error bodies)."""
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


class LLMError(KernelSkillError):
    """A problem talking to the model. The message is safe to print: it never contains a key."""

    # NO_MODEL rather than BAD_INPUT: every LLM error means "no usable model is configured or reachable", and a
    # script driving `kernelskill optimize` must tell that apart from a malformed problem file (BAD_INPUT).
    exit_code = ExitCode.NO_MODEL


class LLMAuthError(LLMError):
    """The key is missing or was rejected. The message names the environment variable to set."""

    def __init__(self, message: str, *, env_var: str) -> None:
        super().__init__(message)
        self.env_var = env_var


class LLMRequestError(LLMError):
    """The provider refused the request for a reason retrying cannot fix (bad request, unknown model …)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMUnavailable(LLMError):
    """Every attempt failed with a transient error (rate limit, server error, timeout, connection)."""

    def __init__(self, message: str, *, attempts: int, last_error: str) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error  # type and message of the last failure, key already redacted


class BudgetExceeded(LLMError):
    """A per-task budget is spent; raised before the call that would exceed it is sent. The loop ends the task
    cleanly on it, keeping the task's best kernel."""

    # TIMEOUT: like a stage past its time limit, a limit the user set was reached; not a missing model.
    exit_code = ExitCode.TIMEOUT

    def __init__(self, message: str, *, limit: str, spent: float, allowed: float) -> None:
        super().__init__(message)
        self.limit = limit  # "max_tokens" or "max_cost"
        self.spent = spent
        self.allowed = allowed
