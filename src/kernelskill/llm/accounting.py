"""Token usage and cost per call and per task, and the per-task budgets that stop a task cleanly.

Prices are data, per million tokens (input, output) in US dollars, as the providers published them for their own
APIs in mid-2025. A model missing from the table, or one served by any endpoint other than the provider's own
(a local vLLM, OpenRouter …), has cost None: the ledger never guesses a price.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from kernelskill.errors import KernelSkillError
from kernelskill.llm.base import BudgetExceeded, Completion, LLMClient, Message, Usage


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


def _p(i: float, o: float) -> Price:
    return Price(input_per_mtok=i, output_per_mtok=o)


# Key: the model string as the user writes it after --model. List prices in USD per million tokens as published in
# mid-2025; they were not re-checked against current price lists, so costs are estimates: pass `prices=` to override,
# and models not listed report no cost at all rather than a guess.
PRICES: dict[str, Price] = {
    "openai/gpt-4o": _p(2.50, 10.00),
    "openai/gpt-4o-mini": _p(0.15, 0.60),
    "openai/gpt-4.1": _p(2.00, 8.00),
    "openai/gpt-4.1-mini": _p(0.40, 1.60),
    "openai/o3": _p(2.00, 8.00),
    "openai/o4-mini": _p(1.10, 4.40),
    "anthropic/claude-sonnet-4-20250514": _p(3.00, 15.00),
    "anthropic/claude-opus-4-20250514": _p(15.00, 75.00),
    "anthropic/claude-3-5-haiku-20241022": _p(0.80, 4.00),
    "anthropic/claude-3-7-sonnet-20250219": _p(3.00, 15.00),
}


def cost_usd(model: str, usage: Usage, prices: Mapping[str, Price] | None = None) -> float | None:
    """Dollar cost of `usage` on `model`, or None when no price is known."""
    price = (PRICES if prices is None else prices).get(model)
    if price is None:
        return None
    return (usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok) / 1e6


class Budget(BaseModel):
    """Per-task limits (`--max-tokens-per-task`, `--max-cost-per-task`); None means no limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(None, gt=0, description="input + output tokens over all calls of the task")
    max_cost: float | None = Field(None, gt=0, description="US dollars over all calls of the task")


class CallRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    usage: Usage
    cost_usd: float | None
    latency_s: float
    attempts: int


class Ledger:
    """Calls of one task, their totals, and the budget they are held to. Thread-safe (seeds run concurrently).

    The budget is checked before each call against what is already spent: a call is never sent once a limit is
    reached. Calls already in flight when the limit is crossed still complete and are recorded, so the final total
    can pass a limit by at most those calls.
    """

    def __init__(self, budget: Budget | None = None, *, prior_tokens: int = 0, prior_cost: float = 0.0) -> None:
        self.budget = budget or Budget()
        self._lock = threading.Lock()
        self._records: list[CallRecord] = []
        # spent before this process started (a resumed task): counted against the budget, not listed in `records`
        self.prior_tokens = prior_tokens
        self.prior_cost = prior_cost

    def check(self) -> None:
        """Raise `BudgetExceeded` if a limit is already reached."""
        with self._lock:
            tokens, cost = self._tokens(), self._cost()
        if self.budget.max_tokens is not None and tokens >= self.budget.max_tokens:
            raise BudgetExceeded(
                f"token budget for this task is spent: {tokens} of {self.budget.max_tokens} tokens used "
                "(raise --max-tokens-per-task to allow more)",
                limit="max_tokens", spent=tokens, allowed=self.budget.max_tokens,
            )
        if self.budget.max_cost is not None and cost >= self.budget.max_cost:
            raise BudgetExceeded(
                f"cost budget for this task is spent: ${cost:.4f} of ${self.budget.max_cost:.4f} used "
                "(raise --max-cost-per-task to allow more)",
                limit="max_cost", spent=cost, allowed=self.budget.max_cost,
            )

    def record(self, completion: Completion) -> CallRecord:
        rec = CallRecord(
            model=completion.model, usage=completion.usage, cost_usd=completion.cost_usd,
            latency_s=completion.latency_s, attempts=completion.attempts,
        )
        with self._lock:
            self._records.append(rec)
        return rec

    @property
    def records(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records)

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self._records)

    @property
    def tokens(self) -> int:
        with self._lock:
            return self._tokens()

    @property
    def cost_usd(self) -> float:
        """Sum over the calls whose price is known; see `unpriced_calls` for the rest."""
        with self._lock:
            return self._cost()

    @property
    def unpriced_calls(self) -> int:
        with self._lock:
            return sum(r.cost_usd is None for r in self._records)

    def _tokens(self) -> int:
        return self.prior_tokens + sum(r.usage.total_tokens for r in self._records)

    def _cost(self) -> float:
        return self.prior_cost + sum(r.cost_usd for r in self._records if r.cost_usd is not None)

    def __repr__(self) -> str:
        return f"Ledger(calls={self.calls}, tokens={self.tokens}, cost_usd={self.cost_usd:.4f}, budget={self.budget!r})"


class MeteredClient:
    """Wraps a client: checks the task's budget before each call and records each completion in the ledger."""

    def __init__(self, client: LLMClient, ledger: Ledger) -> None:
        # A cost budget on a model without a price could never trigger; refuse it rather than ignore it silently.
        if ledger.budget.max_cost is not None and not getattr(client, "priced", False):
            raise KernelSkillError(
                f"--max-cost-per-task cannot be enforced for {client.model}: no price is known for it "
                "(local and third-party endpoints are never priced); use --max-tokens-per-task instead"
            )
        self.inner = client
        self.ledger = ledger
        self.model = client.model

    def complete(
        self, messages: list[Message], *, max_tokens: int = 4096, temperature: float | None = None,
        agent: str | None = None,
    ) -> Completion:
        self.ledger.check()
        completion = self.inner.complete(messages, max_tokens=max_tokens, temperature=temperature, agent=agent)
        self.ledger.record(completion)
        return completion

    def __repr__(self) -> str:
        return f"MeteredClient({self.inner!r}, {self.ledger!r})"
