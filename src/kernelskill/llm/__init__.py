"""LLM providers: one `LLMClient` protocol, clients for OpenAI-compatible endpoints, Anthropic, replayed
transcripts and a scripted fake, with retries, token and cost accounting, and per-task budgets.

Importing this package does not import any provider SDK; `make_client` loads the one a model string needs.
"""

from kernelskill.llm.accounting import Budget, Ledger, MeteredClient, cost_usd
from kernelskill.llm.base import (
    BudgetExceeded,
    Completion,
    LLMAuthError,
    LLMClient,
    LLMError,
    LLMRequestError,
    LLMUnavailable,
    Message,
    Usage,
)
from kernelskill.llm.registry import make_client, no_model_message
from kernelskill.llm.retry import RetryPolicy

__all__ = [
    "Budget", "BudgetExceeded", "Completion", "LLMAuthError", "LLMClient", "LLMError", "LLMRequestError",
    "LLMUnavailable", "Ledger", "Message", "MeteredClient", "RetryPolicy", "Usage", "cost_usd", "make_client",
    "no_model_message",
]
