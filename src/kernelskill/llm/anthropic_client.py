"""`anthropic/<name>`: Anthropic's Messages API through the official `anthropic` SDK."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping

import anthropic

from kernelskill.errors import KernelSkillError
from kernelskill.llm.accounting import PRICES, Price, cost_usd
from kernelskill.llm.base import Completion, LLMAuthError, Message, Secret, Usage
from kernelskill.llm.retry import Failure, RetryPolicy, call_with_retries, classify_sdk_error
from kernelskill.redact import redact_url

KEY_VAR = "ANTHROPIC_API_KEY"


class AnthropicClient:
    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        key: Secret,
        timeout_s: float = 300.0,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        self.model = model  # "anthropic/<name>"
        self.name = model.split("/", 1)[1]
        self.base_url = redact_url(base_url)  # what is shown; the SDK below gets the URL as given
        self.official = base_url is None
        self.priced = self.official and (PRICES if prices is None else prices).get(model) is not None
        self._prices = prices
        self._key = key
        self._policy = policy or RetryPolicy()
        self._sleep, self._rng = sleep, rng
        self._sdk = anthropic.Anthropic(api_key=key.reveal(), base_url=base_url, timeout=timeout_s, max_retries=0)

    @property
    def _where(self) -> str:
        return f"{self.model} at {self.base_url or 'https://api.anthropic.com'}"

    def _auth_error(self, failure: Failure) -> LLMAuthError:
        return LLMAuthError(
            f"{self._where} rejected the key in {KEY_VAR} (HTTP {failure.status}): set {KEY_VAR} to a valid key",
            env_var=KEY_VAR,
        )

    def complete(
        self, messages: list[Message], *, max_tokens: int = 4096, temperature: float | None = None,
        agent: str | None = None,
    ) -> Completion:
        # The Messages API takes system text as a parameter, not as a message.
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        chat = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        if not chat:
            raise KernelSkillError("an Anthropic request needs at least one user message besides the system text")
        params: dict[str, object] = {"model": self.name, "messages": chat, "max_tokens": max_tokens}
        if system:
            params["system"] = system
        if temperature is not None:
            # Not a named parameter of this SDK's create(); sent as a plain body field, as the API accepts it.
            params["extra_body"] = {"temperature": temperature}
        start = time.monotonic()
        response, attempts = call_with_retries(
            lambda: self._sdk.messages.create(**params),
            classify=lambda exc: classify_sdk_error(exc, anthropic),
            policy=self._policy, auth_error=self._auth_error, what=self._where,
            secret=self._key, sleep=self._sleep, rng=self._rng,
        )
        latency = time.monotonic() - start
        text = "".join(getattr(block, "text", "") for block in response.content if block.type == "text")
        usage = Usage(input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens)
        return Completion(
            text=text, usage=usage, model=self.model, latency_s=latency, attempts=attempts,
            cost_usd=cost_usd(self.model, usage, self._prices) if self.official else None,
        )

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self.model!r}, base_url={self.base_url!r})"
