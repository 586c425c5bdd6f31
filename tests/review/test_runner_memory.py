"""The reference runner gives its allocator's cached blocks back before it waits for the candidate's runner
(review/worker/serve.py): CUDA-L1's L2/34 (a 4.3 GB output) ran out of memory beside an idle reference runner that
kept its trials' blocks cached. Its batch's blocks come back with `reserve`, after the candidate's runner is gone."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from kernelskill.review.wire import Command


@pytest.mark.parametrize("role", ["reference", "candidate"])
def test_the_reference_runner_empties_its_cache_before_each_wait_and_keeps_its_reserve(monkeypatch, role):
    from kernelskill.review.worker import judged, serve

    released: list[str] = []
    ran: list[str] = []
    monkeypatch.setattr(serve, "_release_cached_memory", lambda: released.append(ran[-1] if ran else "start"))
    for name in judged.COMMANDS:
        monkeypatch.setitem(judged.COMMANDS, name, lambda *a, name=name, **k: ran.append(name) or {})
    monkeypatch.setattr(judged, "time_reference", lambda *a, **k: ran.append("time_reference") or {})
    monkeypatch.setattr(judged, "stateful", lambda *a, **k: ran.append("stateful") or False)
    order = ["time_reference", "stateful", "outputs", "inputs", "reserve", "prepare", "calls", "commit"]
    lines = [Command(name=n, seeds=[1], out_dir="x").model_dump_json() for n in order]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join([*lines, Command(name="end").model_dump_json()]) + "\n"))
    sent = []
    channel = SimpleNamespace(send=sent.append)
    worker = SimpleNamespace(req=SimpleNamespace(mode="reference" if role == "reference" else "review"))
    assert serve.commands(channel, worker)
    assert ran == order
    if role == "reference":  # before its first wait, and after each command the candidate's runner may follow
        assert released == ["start", "time_reference", "stateful", "outputs", "inputs"]
    else:
        assert released == []
