"""`make_client("provider/name")`: from a model string to a client. Providers are imported lazily, so the package
imports without the `openai` or `anthropic` SDKs until one is actually used."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kernelskill.llm.accounting import Price
from kernelskill.llm.base import LLMAuthError, LLMClient, LLMError, Secret
from kernelskill.llm.retry import RetryPolicy

# Sent when a local server needs no key: the SDKs insist on one. Held in a Secret like a real key, so never logged.
_LOCAL_PLACEHOLDER_KEY = "kernelskill-local-no-key"

ACCEPTED_FORMS = """\
accepted model forms:
  openai/<name>      any OpenAI-compatible endpoint, e.g. openai/gpt-4o, or with --base-url a local vLLM,
                     SGLang or Ollama server: openai/Qwen/Qwen2.5-Coder-32B-Instruct
  anthropic/<name>   Anthropic, e.g. anthropic/claude-sonnet-4-20250514
  replay:<path>      replay recorded replies: a transcript file, or a run folder (its transcript.jsonl),
                     e.g. replay:runs/gelu-20261129-101500
  corpus:<dir>       published kernels as seeds (`kernelskill corpus import`), e.g. with bench --rounds 0
  fake:              a scripted fake model, for tests"""


def no_model_message() -> str:
    """What to tell a user who configured no model: every way to configure one, ready to copy."""
    return """\
No LLM is configured. Pick one of:

  A cloud model (OpenAI or any OpenAI-compatible service such as DeepSeek or OpenRouter):
      export OPENAI_API_KEY=sk-...
      kernelskill optimize PROBLEM.py --model openai/gpt-4o
      (other services: add --base-url, e.g. --base-url https://api.deepseek.com/v1)

  Anthropic:
      export ANTHROPIC_API_KEY=sk-ant-...
      kernelskill optimize PROBLEM.py --model anthropic/claude-sonnet-4-20250514

  A local OpenAI-compatible server (vLLM, SGLang, Ollama; no key needed):
      vllm serve Qwen/Qwen2.5-Coder-32B-Instruct --port 8000
      kernelskill optimize PROBLEM.py --model openai/Qwen/Qwen2.5-Coder-32B-Instruct \\
          --base-url http://127.0.0.1:8000/v1
      (or set OPENAI_BASE_URL instead of passing --base-url)

  Replay the replies recorded in a transcript, without any LLM:
      kernelskill optimize PROBLEM.py --model replay:PATH/transcript.jsonl"""


def make_client(
    model: str | None,
    base_url: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
    prices: Mapping[str, Price] | None = None,
    fake_replies: Sequence[str | BaseException] | None = None,
) -> LLMClient:
    """Build the client `model` names. `env` defaults to the process environment (keys and base URLs come from it).

    Raises `LLMError` (exit code NO_MODEL) when no model is given, the string is malformed, or a key is missing.
    """
    env = os.environ if env is None else env
    if not model or not model.strip():
        raise LLMError(no_model_message())
    model = model.strip()
    if model.startswith("corpus:"):
        if base_url:
            raise LLMError(f"--base-url applies only to openai/ and anthropic/ models, not to {model!r}")
        path = model.removeprefix("corpus:")
        if not path:
            raise LLMError(f"corpus: needs a corpus folder, e.g. corpus:corpora/cuda-l1-h100\n{ACCEPTED_FORMS}")
        from kernelskill.llm.corpus import CorpusClient

        return CorpusClient(Path(path))
    if model.startswith(("replay:", "fake:")):
        if base_url:
            raise LLMError(f"--base-url applies only to openai/ and anthropic/ models, not to {model!r}")
        if model.startswith("fake:"):
            from kernelskill.llm.scripted import FakeClient

            return FakeClient(fake_replies, model=model)
        from kernelskill.llm.scripted import ReplayClient

        path = model.removeprefix("replay:")
        if not path:
            raise LLMError(f"replay: needs a transcript path, e.g. replay:runs/transcript.jsonl\n{ACCEPTED_FORMS}")
        if Path(path).is_dir():  # a run folder: replay the transcript it recorded
            path = str(Path(path) / "transcript.jsonl")
        return ReplayClient(path)

    provider, sep, name = model.partition("/")
    if not sep or not name or provider not in ("openai", "anthropic"):
        what = f"unknown provider {provider!r}" if sep and name else "no provider/ prefix"
        raise LLMError(f"cannot use model {model!r}: {what}\n{ACCEPTED_FORMS}")

    common = {"timeout_s": timeout_s, "policy": retry, "sleep": sleep, "rng": rng, "prices": prices}
    if provider == "openai":
        from kernelskill.llm.openai_client import KEY_VAR, OpenAIClient

        base_url = base_url or env.get("OPENAI_BASE_URL") or None
        key = _key(env, KEY_VAR, model, base_url)
        return OpenAIClient(model, base_url=base_url, key=key, key_given=bool(env.get(KEY_VAR)), **common)

    from kernelskill.llm.anthropic_client import KEY_VAR, AnthropicClient

    base_url = base_url or env.get("ANTHROPIC_BASE_URL") or None
    return AnthropicClient(model, base_url=base_url, key=_key(env, KEY_VAR, model, base_url), **common)


def _key(env: Mapping[str, str], var: str, model: str, base_url: str | None) -> Secret:
    value = env.get(var)
    if value:
        return Secret(value)
    if base_url:  # a local server usually needs no key; if it does, its 401 names the variable
        return Secret(_LOCAL_PLACEHOLDER_KEY)
    raise LLMAuthError(
        f"{var} is not set, so {model} cannot be used: export {var}=<your key>, or pass --base-url to use a "
        f"local OpenAI-compatible server\n\n{no_model_message()}",
        env_var=var,
    )
