"""Credentials inside --base-url (user:password@, ?api_key=) are never stored or shown: run store, summary.json,
transcript, results.json, the report, console lines and error messages all get the redacted URL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.llm import LLMError, RetryPolicy, make_client
from kernelskill.llm.base import Message
from kernelskill.redact import redact_text, redact_url

from kernelskill.llm.local_server import openai_ok

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SECRETS = ("pw-S3CRET", "Q-S3CRET")


def with_credentials(url: str) -> str:
    return url.replace("://", "://alice:pw-S3CRET@", 1) + "?api_key=Q-S3CRET"


def leaks(folder: Path, *texts: str) -> list[str]:
    """Every file under `folder` (bytes: run.db too) and every text that holds a secret."""
    found = [str(p) for p in folder.rglob("*") if p.is_file() and any(s.encode() in p.read_bytes() for s in SECRETS)]
    return found + [t[:200] for t in texts if any(s in t for s in SECRETS)]


def test_redact_url_keeps_the_server_and_masks_the_credentials():
    assert redact_url("https://alice:pw@host:8443/v1?api_key=k&model=m") == "https://***@host:8443/v1?api_key=***&model=m"
    assert redact_url("https://TOKEN@host/v1") == "https://***@host/v1"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redact_url("https://h/v1?access_token=t&X-Amz-Signature=s&region=eu") == \
        "https://h/v1?access_token=***&X-Amz-Signature=***&region=eu"
    assert redact_url(None) is None
    assert redact_text("m at https://a:b@h/v1?key=c failed") == "m at https://***@h/v1?key=*** failed"


def test_error_messages_name_the_endpoint_without_its_credentials():
    client = make_client("openai/m", with_credentials("http://127.0.0.1:9/v1"), env={"OPENAI_API_KEY": "sk-x"},
                         retry=RetryPolicy(max_attempts=2), sleep=lambda s: None)
    with pytest.raises(LLMError) as info:
        client.complete([Message(role="user", content="hi")])
    message = str(info.value)
    assert "127.0.0.1:9" in message and "***@" in message
    assert not leaks(Path("/nonexistent"), message, repr(client), repr(vars(info.value)))


def test_bench_config_results_and_report_hold_the_redacted_url(tmp_path):
    from kernelskill.bench.runner import BenchRequest, run_bench
    from kernelskill.loop.settings import LoopSettings
    from kernelskill.report import write_report
    from kernelskill.settings import ReviewSettings
    from tests.loop.helpers import PROBLEM, AgentScript, FakeEvaluator, kernel

    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "1_gelu.py").write_text(PROBLEM.read_text())
    request = BenchRequest(problems=folder, model="script:", base_url=with_credentials("http://127.0.0.1:9/v1"),
                           out=tmp_path / "run", loop=LoopSettings(seeds=1, rounds=0, profile="off"),
                           review=ReviewSettings(device="cpu"))
    results = run_bench(request, client=AgentScript(generator=[kernel("correct", 1.0)]), evaluator=FakeEvaluator())
    assert results.run["base_url"] == "http://***@127.0.0.1:9/v1?api_key=***"
    write_report(tmp_path / "run")
    assert (tmp_path / "run" / "report.html").is_file()
    assert not leaks(tmp_path / "run")


@pytest.mark.slow
def test_optimize_stores_and_prints_no_credential(server, tmp_path):
    server.add(openai_ok(f"```python\n{(EXAMPLES / 'gelu_chain_triton.py').read_text()}```\n"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["OPENAI_API_KEY"] = "sk-test-url-credentials"
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "kernelskill.cli", "optimize", str(EXAMPLES / "gelu_chain.py"), "--model", "openai/m",
         "--base-url", with_credentials(server.openai_url), "--device", "cpu", "--seeds", "1", "--rounds", "0",
         "--trials", "2", "--warmup", "1", "--iters", "3", "--profile", "off", "--out", str(out), "--json"],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "summary.json").is_file() and (out / "transcript.jsonl").is_file()
    assert not leaks(out, proc.stdout, proc.stderr)
