"""`openai/<name>`: any OpenAI-compatible chat-completions endpoint through the official `openai` SDK.

OpenAI itself, or vLLM, SGLang, Ollama, DeepSeek, OpenRouter … through `--base-url` / `OPENAI_BASE_URL`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from urllib.parse import urlparse

import openai

from kernelskill.llm.accounting import PRICES, Price, cost_usd
from kernelskill.llm.base import Completion, LLMAuthError, Message, Secret, Usage
from kernelskill.llm.retry import Failure, RetryPolicy, call_with_retries, classify_sdk_error
from kernelskill.redact import redact_url

log = logging.getLogger("kernelskill.llm")
KEY_VAR = "OPENAI_API_KEY"
OFFICIAL_HOST = "api.openai.com"


class OpenAIClient:
    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        key: Secret,
        key_given: bool,
        timeout_s: float = 300.0,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        self.model = model  # "openai/<name>"
        self.name = model.split("/", 1)[1]
        self.base_url = redact_url(base_url)  # what is shown; the SDK below gets the URL as given
        self.official = base_url is None or urlparse(base_url).hostname == OFFICIAL_HOST
        self.priced = self.official and (PRICES if prices is None else prices).get(model) is not None
        self._prices = prices
        self._key = key
        self._key_given = key_given  # False: a local server without a key, served a placeholder
        self._policy = policy or RetryPolicy()
        self._sleep, self._rng = sleep, rng
        # max_retries=0: our retry loop is the only one, so every request is counted and backed off our way.
        self._sdk = openai.OpenAI(api_key=key.reveal(), base_url=base_url, timeout=timeout_s, max_retries=0)

    @property
    def _where(self) -> str:
        return f"{self.model} at {self.base_url or 'https://' + OFFICIAL_HOST}"

    def _auth_error(self, failure: Failure) -> LLMAuthError:
        if self._key_given:
            why = f"rejected the key in {KEY_VAR} (HTTP {failure.status})"
        else:
            why = f"requires an API key (HTTP {failure.status}) and {KEY_VAR} is not set"
        return LLMAuthError(f"{self._where} {why}: set {KEY_VAR} to a valid key for this endpoint", env_var=KEY_VAR)

    def complete(
        self, messages: list[Message], *, max_tokens: int = 4096, temperature: float | None = None,
        agent: str | None = None,
    ) -> Completion:
        params: dict[str, object] = {
            "model": self.name,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        # OpenAI's own reasoning models accept only max_completion_tokens; many local servers know only max_tokens.
        params["max_completion_tokens" if self.official else "max_tokens"] = max_tokens
        if temperature is not None:
            params["temperature"] = temperature
        start = time.monotonic()
        response, attempts = call_with_retries(
            lambda: self._sdk.chat.completions.create(**params),
            classify=lambda exc: classify_sdk_error(exc, openai),
            policy=self._policy, auth_error=self._auth_error, what=self._where,
            secret=self._key, sleep=self._sleep, rng=self._rng,
        )
        latency = time.monotonic() - start
        text = (response.choices[0].message.content or "") if response.choices else ""
        if response.usage is not None:
            usage = Usage(input_tokens=response.usage.prompt_tokens, output_tokens=response.usage.completion_tokens)
        else:
            log.warning("%s reported no token usage; estimating it from text length", self._where)
            usage = Usage.estimate(messages, text)
        return Completion(
            text=text, usage=usage, model=self.model, latency_s=latency, attempts=attempts,
            cost_usd=cost_usd(self.model, usage, self._prices) if self.official else None,
        )

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self.model!r}, base_url={self.base_url!r})"
