"""`kernelskill optimize`: one problem through the loop, in a run folder that holds everything.

    DIR/run.db              the run store (SQLite): rounds, candidates, reviews, decisions, every LLM call
    DIR/kernels/NAME/*.py   every kernel the agents wrote
    DIR/reviews/NAME/*/     each review's full worker log
    DIR/best.py             the best correct kernel
    DIR/summary.json        what `--json` prints
    DIR/transcript.jsonl    every reply, for `--model replay:DIR/transcript.jsonl`
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from kernelskill import __version__
from kernelskill.agents.context import TaskBrief
from kernelskill.agents.team import LLMCallEvent, Team
from kernelskill.errors import KernelSkillError
from kernelskill.llm.accounting import Budget, Ledger, MeteredClient
from kernelskill.llm.base import BudgetExceeded, LLMClient
from kernelskill.llm.scripted import ReplayClient
from kernelskill.loop.runner import Event, Profiler, Reviewer, TaskContext, TaskRunner
from kernelskill.loop.settings import LoopSettings
from kernelskill.loop.state import LoopState, RoundRecord
from kernelskill.problem import check_problem, read_problem
from kernelskill.redact import redact_url
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore
from kernelskill.store.lock import hold_run_folder
from kernelskill.store.resume import refuse_changes


class OptimizeRequest(BaseModel):
    problem: Path
    model: str
    base_url: str | None = None
    backend: str = "triton"
    loop: LoopSettings = LoopSettings()
    review: ReviewSettings = ReviewSettings()
    budget: Budget = Budget()
    out: Path | None = None
    resume: bool = False


class OptimizeSummary(BaseModel):
    """The outcome of one `optimize` run: printed at the end, written to summary.json, and `--json`'s object."""

    success: bool  # a correct kernel was found
    best_speedup: float | None  # eager time (median over the task's reviews) / the best kernel's time
    reference_ms: float | None  # that eager time
    best_ms: float | None
    best_label: str | None
    best_path: str | None  # DIR/best.py
    rounds_run: int
    llm_calls: int
    failed_llm_calls: int
    tokens: int
    cost_usd: float | None  # None when no call had a known price
    ended: str | None  # why the task stopped before its last round, if it did
    problem: str
    backend: str
    device: str
    model: str
    run_dir: str
    store: str
    transcript: str | None
    seeds: int
    rounds: int
    long_term_memory: bool
    short_term_memory: bool
    stage_seconds: dict[str, float] = {}  # evaluation seconds by stage, summed over the task (see RunStore.stage_totals)
    history: list[RoundRecord] = Field(default_factory=list)
    seconds: float


def default_run_dir(problem: Path) -> Path:
    return Path("runs") / f"{problem.stem}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def optimize(
    request: OptimizeRequest,
    *,
    client: LLMClient | None = None,
    reviewer: Reviewer | None = None,
    profiler: Profiler | None | str = "default",
    prebuild: Callable | None | str = "default",
    on_event: Callable[[Event], None] = lambda e: None,
) -> OptimizeSummary:
    """Run (or resume) the loop on one problem. `client`, `reviewer`, `profiler` and `prebuild` replace the real
    ones in tests."""
    from kernelskill.review.reviewer import resolve_device

    start = time.monotonic()
    problem = read_problem(request.problem)  # a malformed problem fails here, before any model is asked
    check_problem(problem)  # ... and one whose Model or get_inputs() raises, before any run folder is made
    if request.backend not in ("triton", "cuda"):
        raise KernelSkillError(f"--backend must be triton or cuda, not {request.backend!r}")
    device = resolve_device(request.review.device)
    if device == "cuda" and request.backend == "cuda" and reviewer is None:
        from kernelskill.review.reviewer import prepare_builds

        prepare_builds()
    if device == "cpu" and request.backend == "cuda":
        raise KernelSkillError(
            "--backend cuda needs a GPU: on this machine CUDA kernels can be compile-checked but never run, so no "
            "candidate could be verified. Use --backend triton (Triton's interpreter runs kernels on the CPU) or run "
            "on a machine with an NVIDIA GPU."
        )
    review_settings = request.review.model_copy(update={"device": device, "backend": request.backend})

    if request.resume and request.out is None:
        raise KernelSkillError("--resume needs --out DIR: the run folder of the run to continue")
    run_dir = request.out or default_run_dir(problem.path)
    # one writer per run folder: a second `--resume` of the same folder would redo the same rounds
    with hold_run_folder(run_dir, create=not request.resume, command="optimize"):
        store = RunStore.open(run_dir) if request.resume else RunStore.create(run_dir)
        with store:
            return _optimize_in(store, request, problem, device, review_settings, client, reviewer, profiler,
                                prebuild, on_event, start)


def _optimize_in(store: RunStore, request: OptimizeRequest, problem, device: str, review_settings: ReviewSettings,
                 client, reviewer, profiler, prebuild, on_event, start: float) -> OptimizeSummary:
    """The run itself, in the locked and opened run store."""
    from kernelskill.llm.registry import make_client

    run_id, task_id, loop_settings, model = _run_and_task(store, request, problem, device, review_settings)
    on_event(Event("info", f"run folder {store.run_dir} ({'resumed' if request.resume else 'new'}); "
                           f"{problem.name} on {device}, {request.backend}, model {model}"))
    if client is None:
        client = make_client(model, request.base_url)
    if isinstance(client, ReplayClient):  # replies the interrupted run already used are not served again
        for agent, count in _used_replies(store, task_id).items():
            client.skip(agent, count)
    kb = None
    if loop_settings.long_term_memory:
        from kernelskill.memory.knowledge import load_knowledge

        kb = load_knowledge()
    if profiler == "default":
        profiler = default_profiler(loop_settings, device, store.run_dir)
    ctx = task_context(
        store, run_id, task_id, problem, client, request.budget, kb, review_settings, loop_settings,
        reviewer or real_reviewer, profiler, on_event, device,
        prebuild=(real_prebuild if reviewer is None and device == "cuda" else None) if prebuild == "default" else prebuild,
    )
    try:
        state = TaskRunner(ctx).run()
    except KeyboardInterrupt:
        store.set_run_status(run_id, "interrupted")
        store.set_task_status(task_id, "running", reason="interrupted; continue with --resume")
        raise
    except BaseException:
        store.set_run_status(run_id, "failed")
        raise
    seconds = time.monotonic() - start
    return _finish(store, run_id, task_id, state, request, loop_settings, device, model, seconds)


def task_context(
    store: RunStore, run_id: int, task_id: int, problem, client: LLMClient, budget: Budget, kb,
    review_settings: ReviewSettings, loop_settings: LoopSettings, reviewer: Reviewer, profiler: Profiler | None,
    on_event: Callable[[Event], None], device: str, review_lock=None, prebuild=None,
) -> TaskContext:
    """Everything one task runs against: its own budget and ledger (counting what a resumed task already spent),
    an agent team whose every call is recorded in the store, and the shared reviewer and profiler."""
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
                     device=device, device_name=_device_name(device), allow_torch_ops=review_settings.allow_torch_ops,
                     atol=review_settings.atol, rtol=review_settings.rtol)
    extra = {"review_lock": review_lock} if review_lock is not None else {}
    return TaskContext(
        store=store, run_id=run_id, task_id=task_id, problem_path=problem.path, task=task,
        team=Team(metered, on_call=record), kb=kb, review_settings=review_settings, settings=loop_settings,
        reviewer=reviewer, profiler=profiler, on_event=on_event, replayed=isinstance(client, ReplayClient),
        prebuild=prebuild, **extra,
    )


def _run_and_task(store: RunStore, request: OptimizeRequest, problem, device: str, review_settings: ReviewSettings):
    """The run and task rows: new ones, or (resuming) the stored ones, whose settings then apply."""
    config = {
        "problem": str(problem.path), "backend": request.backend, "device": device, "base_url": redact_url(request.base_url),
        "loop": request.loop.model_dump(mode="json"), "review": review_settings.model_dump(mode="json"),
        "budget": request.budget.model_dump(mode="json"), "kernelskill": __version__,
    }
    if not request.resume:
        run_id = store.add_run("optimize", request.model, config)
        task_id = store.add_task(run_id, problem.name, str(problem.path), problem.source)
        return run_id, task_id, request.loop, request.model
    run = store.latest_run()
    if run is None:
        raise KernelSkillError(f"{store.db_path} holds no run to resume")
    # more rounds continue the same trajectory; anything else would mix two experiments in one folder
    refuse_changes(store.run_dir, {**run.config, "model": run.model}, {**config, "model": request.model},
                   may_raise=frozenset({"loop.rounds"}))
    task = store.find_task(run.id, problem.name)
    if task is None:
        names = ", ".join(t.name for t in store.tasks(run.id)) or "none"
        raise KernelSkillError(f"the run in {store.run_dir} did not optimize {problem.name} (its tasks: {names})")
    if task.problem_source != problem.source:
        raise KernelSkillError(
            f"{problem.path} changed since the run in {store.run_dir} started; resume with the same problem file, "
            "or start a new run with another --out"
        )
    store.set_run_status(run.id, "running")
    stored = LoopSettings.model_validate(run.config["loop"])
    # the number of rounds may be raised on resume; everything else stays as the run began
    loop = stored.model_copy(update={"rounds": max(stored.rounds, request.loop.rounds)})
    return run.id, task.id, loop, request.model


def _used_replies(store: RunStore, task_id: int) -> dict[str, int]:
    """Replies per agent consumed by the rounds that finished (an abandoned round's calls are asked again)."""
    finished = {r.id for r in store.rounds(task_id) if r.status in ("done", "failed")}
    counts: dict[str, int] = {}
    for call in store.llm_calls(task_id=task_id):
        if call.reply is not None and call.round_id in finished:
            counts[call.agent] = counts.get(call.agent, 0) + 1
    return counts


def _finish(store: RunStore, run_id: int, task_id: int, state: LoopState, request: OptimizeRequest,
            loop: LoopSettings, device: str, model: str, seconds: float) -> OptimizeSummary:
    run_dir = store.run_dir
    state.restate_history()
    best_path = None
    if state.best is not None:
        best_path = run_dir / "best.py"
        tmp = best_path.with_suffix(".tmp")
        tmp.write_text(state.best.source)
        tmp.replace(best_path)
    transcript = run_dir / "transcript.jsonl"
    n = store.export_transcript(task_id, transcript)
    totals = store.llm_totals(task_id)
    summary = OptimizeSummary(
        success=state.best is not None, best_speedup=state.speedup_of(state.best),
        best_ms=state.best.ms if state.best else None, reference_ms=state.reference_ms(),
        best_label=state.best.label if state.best else None,
        best_path=str(best_path) if best_path else None, rounds_run=state.round, llm_calls=totals["calls"],
        failed_llm_calls=totals["failed_calls"], tokens=totals["tokens"],
        cost_usd=totals["cost_usd"] if totals["calls"] > totals["unpriced_calls"] else None,
        ended=state.ended, problem=str(request.problem), backend=request.backend, device=device, model=model,
        run_dir=str(run_dir), store=str(store.db_path), transcript=str(transcript) if n else None,
        seeds=loop.seeds, rounds=loop.rounds, long_term_memory=loop.long_term_memory,
        short_term_memory=loop.short_term_memory, history=state.history, seconds=round(seconds, 1),
        stage_seconds=store.stage_totals(task_id),
    )
    (run_dir / "summary.json").write_text(summary.model_dump_json(indent=2))
    store.set_task_status(task_id, "finished", reason=state.ended, summary=summary.model_dump(mode="json",
                                                                                           exclude={"history"}))
    store.set_run_status(run_id, "finished")
    return summary


def real_reviewer(problem: Path, candidate, settings: ReviewSettings, log_dir: Path):
    from kernelskill.review.reviewer import review

    return review(problem, candidate, settings, log_dir=log_dir)


def real_prebuild(problem: Path, candidate, settings: ReviewSettings, log_dir: Path):
    from kernelskill.review.reviewer import prebuild

    return prebuild(problem, candidate, settings, log_dir=log_dir)


def default_profiler(loop: LoopSettings, device: str, run_dir: Path) -> Profiler | None:
    if loop.profile == "off" or not loop.long_term_memory:
        return None
    from kernelskill.memory.profiling import ProfileSettings, find_ncu

    if device != "cuda":
        if loop.profile == "on":
            raise KernelSkillError("--profile on needs a GPU; on the CPU the decision rests on code features alone")
        return None
    if find_ncu("ncu") is None:
        if loop.profile == "on":
            raise KernelSkillError("--profile on needs Nsight Compute: put `ncu` on PATH (it ships with the CUDA "
                                   "toolkit), or use --profile auto to decide on code features when it is missing")
        return None

    def profile(problem: Path, candidate: Path, kb):
        from kernelskill.memory.collect import profile_candidate

        keep = run_dir / "profiles" / candidate.stem
        return profile_candidate(problem, candidate, kb, ProfileSettings(keep_dir=keep))

    return profile


def _device_name(device: str) -> str | None:
    if device != "cuda":
        return "cpu (Triton interpreter)"
    import torch

    return torch.cuda.get_device_name(0)
