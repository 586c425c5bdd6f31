"""What the run store hands back: one frozen model per table row, JSON columns decoded.

A `*_json` column appears here without the suffix (`rounds.state_json` is `RoundRow.state`). The models are
read-only snapshots: change the store through `RunStore`'s methods, then read the row again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

Branch = Literal["seed", "repair", "optimize"]  # what a round does (the loop's branches)
RunKind = Literal["optimize", "bench"]
RunStatus = Literal["running", "finished", "interrupted", "failed"]
TaskStatus = Literal["pending", "running", "finished", "failed"]
RoundStatus = Literal["running", "done", "failed", "abandoned"]
Origin = Literal["seed", "repair", "optimize"]
ReviewPurpose = Literal["verdict", "baseline"]  # baseline: the best kernel timed again against torch.compile


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int


class RunRow(_Row):
    kind: RunKind
    created_at: datetime
    finished_at: datetime | None
    status: RunStatus
    model: str
    config: dict
    kernelskill_version: str


class TaskRow(_Row):
    run_id: int
    name: str
    problem_path: str
    problem_sha256: str
    problem_source: str
    status: TaskStatus
    reason: str | None  # why the task failed (or anything else worth saying about its status)
    best_candidate_id: int | None
    base_candidate_id: int | None
    summary: dict | None
    started_at: datetime | None
    finished_at: datetime | None


class RoundRow(_Row):
    task_id: int
    idx: int  # 0: the seed phase; 1..N: the rounds
    branch: Branch
    status: RoundStatus
    method: str | None
    note: str | None
    outcome: dict | None
    state: dict | None  # the loop's state after the round: what a resumed run starts from
    started_at: datetime
    finished_at: datetime | None


class CandidateRow(_Row):
    task_id: int
    round_id: int | None
    label: str
    path: str  # relative to the run folder
    sha256: str
    source: str
    parent_id: int | None
    origin: Origin
    created_at: datetime


class ReviewRow(_Row):
    candidate_id: int
    correct: bool
    compiled: bool
    stage: str | None
    error_kind: str | None
    error: str | None
    speedup: float | None
    ref_ms: float | None
    candidate_ms: float | None
    compile_ms: float | None
    speedup_vs_compile: float | None
    flags: list[str]
    stage_seconds: dict[str, float]
    result: dict  # the whole ReviewResult, as JSON
    created_at: datetime
    purpose: ReviewPurpose = "verdict"


class ProfileRow(_Row):
    candidate_id: int
    evidence: dict
    created_at: datetime
    seconds: float | None = None  # the profile's own run
    queue_seconds: float | None = None  # waiting for its device


class DecisionRow(_Row):
    round_id: int | None
    candidate_id: int | None
    bottleneck: str
    case_id: str | None
    allowed: list[str]
    decision: dict  # the whole Decision trace, as JSON
    created_at: datetime


class LLMCallRow(_Row):
    run_id: int
    task_id: int | None
    round_id: int | None  # the round row: a resumed run may redo a round index, so round_idx alone is ambiguous
    round_idx: int | None
    slot: int  # the seed number for Generator calls, else 0
    agent: str
    attempt: int  # 1, or 2 for a re-ask
    messages: list[dict]
    reply: str | None
    error: str | None
    input_tokens: int
    output_tokens: int
    tokens_estimated: bool
    cost_usd: float | None  # None: no price known for the model, never a guess
    latency_s: float
    attempts: int  # HTTP requests sent, retries included
    model: str
    created_at: datetime
