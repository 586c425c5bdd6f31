"""`kernelskill optimize`: one problem through the loop, in a run folder that holds everything.

    DIR/run.db              the run store (SQLite): rounds, candidates, reviews, decisions, every LLM call
    DIR/kernels/NAME/*.py   every kernel the agents wrote
    DIR/reviews/NAME/*/     each review's full worker log
    DIR/profiles/NAME/*/    each profiled base's driver, logs, ncu report and CSV (on a GPU with ncu)
    DIR/best.py             the best correct kernel
    DIR/summary.json        what `--json` prints
    DIR/transcript.jsonl    every reply, for `--model replay:DIR/transcript.jsonl`
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, computed_field

from kernelskill import __version__
from kernelskill.errors import KernelSkillError
from kernelskill.folders import write_atomically
from kernelskill.llm.accounting import Budget
from kernelskill.llm.base import LLMClient
from kernelskill.llm.scripted import ReplayClient
from kernelskill.loop.context import Event, task_context
from kernelskill.loop.evaluator import Evaluator, local_evaluator, wants_profiles
from kernelskill.loop.runner import TaskRunner
from kernelskill.loop.settings import LoopSettings
from kernelskill.loop.setup import RunSetup, open_run, resume_stored_run, with_run_settings
from kernelskill.loop.state import LoopState
from kernelskill.problem import Problem, read_problem
from kernelskill.review.probe import check_problem
from kernelskill.redact import redact_url
from kernelskill.settings import Backend, ReviewSettings
from kernelskill.store import RunStore
from kernelskill.loop.outcome import TaskOutcome, summarize


class OptimizeRequest(BaseModel):
    """What to run. Fields and nested settings left unset (pydantic's `model_fields_set`) take, on a resume, the
    run's own values rather than the defaults: a resume spends only what the run was started to spend."""

    problem: Path
    model: str | None = None  # None only on a resume: the run's own model
    base_url: str | None = None
    backend: Backend = "triton"
    loop: LoopSettings = LoopSettings()
    review: ReviewSettings = ReviewSettings()
    budget: Budget = Budget()
    out: Path | None = None
    resume: bool = False


class OptimizeSummary(TaskOutcome):
    """The outcome of one `optimize` run (TaskOutcome) and where it ran: printed at the end, written to
    summary.json, and `--json`'s object."""

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

    # the names summary.json had before TaskOutcome: kept, for whatever reads them
    @computed_field  # type: ignore[prop-decorator]
    @property
    def reference_ms(self) -> float | None:
        return self.eager_ms

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ended(self) -> str | None:
        return self.reason


def default_run_dir(problem: Path) -> Path:
    return Path("runs") / f"{problem.stem}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def optimize(
    request: OptimizeRequest,
    *,
    client: LLMClient | None = None,
    evaluator: Evaluator | None = None,
    on_event: Callable[[Event], None] = lambda e: None,
) -> OptimizeSummary:
    """Run (or resume) the loop on one problem. `client` and `evaluator` replace the real ones in tests."""
    start = time.monotonic()
    problem = read_problem(request.problem)  # a malformed problem fails here, before any model is asked
    # ... and one whose Model or get_inputs() raises (in a confined child), before any run folder is made
    check_problem(problem)
    if request.resume and request.out is None:
        raise KernelSkillError("--resume needs --out DIR: the run folder of the run to continue")
    if not request.resume and not request.model:
        from kernelskill.llm.base import LLMError
        from kernelskill.llm.registry import no_model_message

        raise LLMError(no_model_message())
    if request.resume:  # the run's own settings, unless the command gave them (and may raise)
        request = with_run_settings(request, "optimize")
    owned = evaluator is None
    evaluator = evaluator or local_evaluator(request.review.device, request.backend)
    with open_run(request.out or default_run_dir(problem.path), "optimize", resume=request.resume,
                  evaluator=evaluator, backend=request.backend, review=request.review, owns_evaluator=owned) as run:
        return _optimize_in(run, request, problem, client, on_event, start)


def continue_command(problem: Path | str, out: Path | str) -> str:
    """The command that continues an interrupted run, ready to paste: the run's settings, model included, come from
    its folder, so nothing else needs repeating."""
    import shlex

    return f"kernelskill optimize {shlex.quote(str(problem))} --out {shlex.quote(str(out))} --resume"


def _optimize_in(run: RunSetup, request: OptimizeRequest, problem: Problem, client: LLMClient | None,
                 on_event: Callable[[Event], None], start: float) -> OptimizeSummary:
    """The run itself, in the locked and opened run store."""
    store, evaluator, review_settings = run.store, run.evaluator, run.review
    device = evaluator.device
    run_id, task_id, loop_settings, model = _run_and_task(store, request, problem, device, review_settings)
    assert model is not None
    on_event(Event("info", f"run folder {store.run_dir} ({'resumed' if request.resume else 'new'}); "
                           f"{problem.name} on {device}, {request.backend}, model {model}"))
    client = run.client(model, request.base_url, given=client)
    if isinstance(client, ReplayClient):  # replies the interrupted run already used are not served again
        for agent, count in _used_replies(store, task_id).items():
            client.skip(agent, count)
    kb = run.knowledge(loop_settings)
    ctx = task_context(store, run_id, task_id, problem, client, request.budget, kb, review_settings, loop_settings,
                       evaluator, on_event, profiles=wants_profiles(loop_settings, evaluator))
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


def _run_and_task(store: RunStore, request: OptimizeRequest, problem, device: str, review_settings: ReviewSettings):
    """The run and task rows: new ones, or (resuming) the stored ones, whose settings then apply."""
    config = {
        "problem": str(problem.path), "backend": request.backend, "device": device, "base_url": redact_url(request.base_url),
        "loop": request.loop.model_dump(mode="json"), "review": review_settings.model_dump(mode="json"),
        "budget": request.budget.model_dump(mode="json"), "kernelskill": __version__,
    }
    if not request.resume:
        assert request.model is not None
        run_id = store.add_run("optimize", request.model, config)
        task_id = store.add_task(run_id, problem.name, str(problem.path), problem.source)
        return run_id, task_id, request.loop, request.model
    run = resume_stored_run(store, "optimize", {**config, "model": request.model})
    task = store.find_task(run.id, problem.name)
    if task is None:
        names = ", ".join(t.name for t in store.tasks(run.id)) or "none"
        raise KernelSkillError(f"the run in {store.run_dir} did not optimize {problem.name} (its tasks: {names})")
    if task.problem_source != problem.source:
        raise KernelSkillError(
            f"{problem.path} changed since the run in {store.run_dir} started; resume with the same problem file, "
            "or start a new run with another --out"
        )
    return run.id, task.id, request.loop, request.model


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
    best_path = write_atomically(run_dir / "best.py", state.best.source) if state.best is not None else None
    transcript = run_dir / "transcript.jsonl"
    n = store.export_transcript(task_id, transcript)
    outcome = summarize(store, task_id, state, best_path=str(best_path) if best_path else None,
                        seconds=round(seconds, 1))
    summary = OptimizeSummary(
        **dict(outcome), problem=str(request.problem), backend=request.backend, device=device, model=model,
        run_dir=str(run_dir), store=str(store.db_path), transcript=str(transcript) if n else None,
        seeds=loop.seeds, rounds=loop.rounds, long_term_memory=loop.long_term_memory,
        short_term_memory=loop.short_term_memory,
    )
    write_atomically(run_dir / "summary.json", summary.model_dump_json(indent=2))
    store.set_task_status(task_id, "finished", reason=state.ended, summary=summary.model_dump(mode="json",
                                                                                           exclude={"history"}))
    store.set_run_status(run_id, "finished")
    return summary
