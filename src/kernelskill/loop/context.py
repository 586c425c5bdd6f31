"""What one task runs against: its rows in the run store, its problem, an agent team whose every call is recorded,
and the evaluator its candidates are reviewed and profiled by. `optimize` and `bench` both build it here."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernelskill.agents.context import TaskBrief
from kernelskill.agents.team import LLMCallEvent, Team
from kernelskill.llm.accounting import Budget, Ledger, MeteredClient
from kernelskill.llm.base import BudgetExceeded, LLMClient
from kernelskill.llm.scripted import ReplayClient
from kernelskill.loop.evaluator import Evaluator
from kernelskill.loop.settings import LoopSettings
from kernelskill.loop.state import LoopState
from kernelskill.memory.knowledge import KnowledgeBase
from kernelskill.problem import Problem
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore
from kernelskill.loop.outcome import RoundRecord


@dataclass
class Event:
    """Progress for the live display: "phase" (something started), "round" (a round finished) or "info"."""

    kind: str
    text: str = ""
    record: RoundRecord | None = None
    state: LoopState | None = None


@dataclass
class TaskContext:
    """What a task runs against: its store rows and problem file, its agents, its settings and its evaluator."""

    store: RunStore
    run_id: int
    task_id: int
    problem_path: Path
    task: TaskBrief
    team: Team
    kb: KnowledgeBase | None
    review_settings: ReviewSettings
    settings: LoopSettings
    evaluator: Evaluator  # where every review and profile of the task runs (loop/evaluator.py)
    profiles: bool = False  # profile each base for the decision policy (evaluator.wants_profiles)
    on_event: Callable[[Event], None] = lambda e: None
    replayed: bool = False  # the model replays a transcript: seeds are asked one after another, in order
    stop: threading.Event | None = None  # set: finish the round in flight, then return (the task stays resumable)


def task_context(
    store: RunStore, run_id: int, task_id: int, problem: Problem, client: LLMClient, budget: Budget,
    kb: KnowledgeBase | None, review_settings: ReviewSettings, loop_settings: LoopSettings, evaluator: Evaluator,
    on_event: Callable[[Event], None], *, profiles: bool, stop: threading.Event | None = None,
) -> TaskContext:
    """The task's context: its own budget and ledger (counting what a resumed task already spent) and an agent team
    whose every call is recorded in the store."""
    totals = store.llm_totals(task_id)
    ledger = Ledger(budget, prior_tokens=totals["tokens"], prior_cost=totals["cost_usd"] or 0.0)
    metered = MeteredClient(client, ledger)

    def record(event: LLMCallEvent) -> None:
        c = event.completion
        if c is None and (event.error or "").startswith(BudgetExceeded.__name__):
            return  # refused before sending: not a call
        store.add_llm_call(
            run_id=run_id, task_id=task_id, round_id=event.tag.get("round_id"), round_idx=event.tag.get("round"),
            slot=event.tag.get("slot", 0), agent=event.agent, attempt=event.attempt,
            messages=[m.model_dump() for m in event.messages], reply=c.text if c else None, error=event.error,
            input_tokens=c.usage.input_tokens if c else 0, output_tokens=c.usage.output_tokens if c else 0,
            tokens_estimated=c.usage.estimated if c else False, cost_usd=c.cost_usd if c else None,
            latency_s=c.latency_s if c else 0.0, attempts=c.attempts if c else 1, model=metered.model,
        )

    task = TaskBrief(name=problem.name, source=problem.source, backend=review_settings.backend or "triton",
                     device=evaluator.device, device_name=evaluator.device_name(),
                     allow_torch_ops=review_settings.allow_torch_ops, atol=review_settings.atol,
                     rtol=review_settings.rtol)
    return TaskContext(
        store=store, run_id=run_id, task_id=task_id, problem_path=problem.path, task=task,
        team=Team(metered, on_call=record), kb=kb, review_settings=review_settings, settings=loop_settings,
        evaluator=evaluator, profiles=profiles, on_event=on_event, replayed=isinstance(client, ReplayClient),
        stop=stop,
    )
