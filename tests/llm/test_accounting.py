from __future__ import annotations

import threading

import pytest

from kernelskill.errors import ExitCode, KernelSkillError
from kernelskill.llm import Budget, BudgetExceeded, Completion, Ledger, MeteredClient, Usage, cost_usd, make_client
from kernelskill.llm.accounting import PRICES, Price

from .conftest import KEY, ask
from kernelskill.llm.local_server import openai_ok


def test_cost_from_the_price_table():
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000)
    price = PRICES["openai/gpt-4o"]
    assert cost_usd("openai/gpt-4o", usage) == pytest.approx(price.input_per_mtok + price.output_per_mtok / 2)
    assert cost_usd("openai/some-local-model", usage) is None  # unknown: never a guess
    assert cost_usd("x/y", usage, {"x/y": Price(input_per_mtok=1, output_per_mtok=2)}) == pytest.approx(2.0)


def completion(tokens_in, tokens_out, cost):
    return Completion(text="r", usage=Usage(input_tokens=tokens_in, output_tokens=tokens_out), model="m",
                      latency_s=0.1, cost_usd=cost, attempts=1)


def test_ledger_totals():
    ledger = Ledger()
    ledger.record(completion(10, 5, 0.01))
    ledger.record(completion(3, 2, None))
    assert (ledger.calls, ledger.tokens, ledger.unpriced_calls) == (2, 20, 1)
    assert ledger.cost_usd == pytest.approx(0.01)


def test_ledger_is_thread_safe():
    ledger = Ledger()
    threads = [threading.Thread(target=lambda: [ledger.record(completion(1, 1, 0.0)) for _ in range(200)])
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.calls == 1600 and ledger.tokens == 3200


def test_token_budget_stops_the_call_before_it_is_sent(server):
    server.add(openai_ok("first", prompt_tokens=80, completion_tokens=40), openai_ok("never served"))
    inner = make_client("openai/m", server.openai_url, env={"OPENAI_API_KEY": KEY})
    client = MeteredClient(inner, Ledger(Budget(max_tokens=100)))
    assert client.complete(ask()).text == "first"
    with pytest.raises(BudgetExceeded) as info:
        client.complete(ask())
    assert len(server.requests) == 1  # the second request never left
    assert info.value.limit == "max_tokens" and info.value.spent == 120 and info.value.allowed == 100
    assert "--max-tokens-per-task" in str(info.value) and info.value.exit_code == ExitCode.TIMEOUT
    assert client.ledger.calls == 1


class PricedStub:
    """A priced client without a network, to exercise the cost budget."""

    model = "stub/priced"
    priced = True

    def __init__(self):
        self.sent = 0

    def complete(self, messages, *, max_tokens=4096, temperature=None, agent=None):
        self.sent += 1
        return completion(100, 100, 0.30)


def test_cost_budget():
    stub = PricedStub()
    client = MeteredClient(stub, Ledger(Budget(max_cost=0.5)))
    client.complete(ask())
    client.complete(ask())  # 0.30 spent < 0.50: allowed; it brings the total to 0.60
    with pytest.raises(BudgetExceeded, match="--max-cost-per-task") as info:
        client.complete(ask())
    assert stub.sent == 2 and info.value.limit == "max_cost" and info.value.spent == pytest.approx(0.6)


def test_cost_budget_on_an_unpriced_model_is_refused(server):
    inner = make_client("openai/local", server.openai_url, env={})
    with pytest.raises(KernelSkillError, match="cannot be enforced"):
        MeteredClient(inner, Ledger(Budget(max_cost=1.0)))


def test_official_endpoint_is_priced():
    c = make_client("openai/gpt-4o", env={"OPENAI_API_KEY": KEY})
    assert c.priced
    assert not make_client("openai/gpt-4o", "http://127.0.0.1:9/v1", env={"OPENAI_API_KEY": KEY}).priced
    assert not make_client("openai/unknown-model", env={"OPENAI_API_KEY": KEY}).priced
