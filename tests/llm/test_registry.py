from __future__ import annotations

import subprocess
import sys

import pytest

from kernelskill.errors import ExitCode
from kernelskill.llm import LLMAuthError, LLMClient, LLMError, make_client, no_model_message
from kernelskill.llm.scripted import FakeClient

from .conftest import ask


@pytest.mark.parametrize("model", ["gpt-4o", "azure/gpt-4o", "openai/", "/gpt-4o"])
def test_bad_model_strings_list_the_accepted_forms(model):
    with pytest.raises(LLMError) as info:
        make_client(model, env={})
    message = str(info.value)
    assert "openai/gpt-4o" in message and "anthropic/" in message and "replay:" in message
    assert repr(model) in message


def test_unknown_provider_is_named():
    with pytest.raises(LLMError, match="unknown provider 'azure'"):
        make_client("azure/gpt-4o", env={})


@pytest.mark.parametrize("model", [None, "", "  "])
def test_no_model_says_how_to_configure_one(model):
    with pytest.raises(LLMError) as info:
        make_client(model, env={})
    assert info.value.exit_code == ExitCode.NO_MODEL
    assert str(info.value) == no_model_message()


def test_no_model_message_covers_every_way():
    text = no_model_message()
    for needle in ("OPENAI_API_KEY", "--model openai/gpt-", "ANTHROPIC_API_KEY", "anthropic/", "vLLM", "SGLang",
                   "Ollama", "--base-url http://127.0.0.1:8000/v1", "replay:"):
        assert needle in text, needle


def test_missing_openai_key_names_the_variable():
    with pytest.raises(LLMAuthError) as info:
        make_client("openai/gpt-4o", env={})
    assert info.value.env_var == "OPENAI_API_KEY" and "export OPENAI_API_KEY" in str(info.value)
    assert info.value.exit_code == ExitCode.NO_MODEL


def test_base_url_only_for_network_providers(tmp_path):
    with pytest.raises(LLMError, match="--base-url"):
        make_client("fake:", "http://127.0.0.1:1/v1")


def test_fake_client_is_deterministic_and_scripted():
    echo = make_client("fake:")
    assert isinstance(echo, LLMClient)
    assert echo.complete(ask("hello")).text == "fake reply 1 to: hello"
    assert make_client("fake:").complete(ask("hello")).text == "fake reply 1 to: hello"
    scripted = make_client("fake:", fake_replies=["one", RuntimeError("scripted failure")])
    assert isinstance(scripted, FakeClient)
    assert scripted.complete(ask()).text == "one"
    with pytest.raises(RuntimeError, match="scripted failure"):
        scripted.complete(ask())
    with pytest.raises(LLMError, match="asked for reply 3"):
        scripted.complete(ask())
    assert len(scripted.calls) == 3 and scripted.calls[0][-1].content == "Write a kernel."


def test_package_imports_without_provider_sdks():
    code = (
        "import sys, kernelskill.llm as l; l.make_client('fake:');"
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules, 'SDK imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_every_client_satisfies_the_protocol(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"reply": "r"}\n')
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    for model in ("openai/m", "anthropic/m", f"replay:{tmp_path / 't.jsonl'}", "fake:"):
        client = make_client(model, env=env)
        assert isinstance(client, LLMClient) and client.model == model
