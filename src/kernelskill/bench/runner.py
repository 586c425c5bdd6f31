"""The benchmark scheduler: tasks run concurrently, each through the loop; reviews and profiles take a GPU of the
run's evaluator (loop/evaluator.py: this machine's GPUs, one evaluation per GPU at a time, or with `ray` set a GPU
of a Ray cluster) while other tasks wait on their LLM calls. Results and logs land in the one run folder.

A failing task (a malformed problem file, a model unreachable past its retries, anything that raises) is recorded
with its reason and the run goes on; only a rejected API key stops the run, since every task would fail the same way.
After every finished task `results.json` is rewritten, so an interrupted run still has its results so far, and
`--resume` skips finished tasks and continues unfinished ones from their last finished round.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelskill import __version__
from kernelskill.bench.discover import BenchTask, discover
from kernelskill.errors import KernelSkillError, ProblemError
from kernelskill.folders import write_atomically
from kernelskill.llm.accounting import Budget
from kernelskill.llm.base import LLMAuthError, LLMClient
from kernelskill.loop.context import Event, task_context
from kernelskill.loop.devices import REVIEWS_PER_GPU
from kernelskill.loop.evaluator import Evaluator, pooled_evaluator, wants_profiles
from kernelskill.loop.setup import open_run, resume_stored_run, with_run_settings
from kernelskill.loop.runner import TaskRunner
from kernelskill.loop.settings import Ablation, LoopSettings
from kernelskill.loop.state import LoopState
from kernelskill.problem import read_problem
from kernelskill.review.probe import SandboxUnavailable, check_problem
from kernelskill.redact import redact_url
from kernelskill.report.results import BenchResults, TaskResult, build_results, write_results
from kernelskill.settings import Backend, Baseline, ReviewSettings
from kernelskill.store import RunStore, safe_name
from kernelskill.loop.outcome import summarize


class BenchRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    problems: Path | None = None  # None only on a resume: the run's own folder of problems
    levels: set[str] | None = None
    indices: set[int] | None = None
    model: str | None = None  # None only on a resume: the run's own model
    base_url: str | None = None
    backend: Backend = "triton"
    gpus: list[str] | None = None  # None: every visible GPU (or the CPU)
    reviews_per_gpu: int | None = Field(None, ge=1, le=16)  # None: loop/devices.REVIEWS_PER_GPU
    parallel: int | None = Field(None, ge=1)  # tasks in flight; None: 2 per slot, so LLM waits overlap evaluations
    loop: LoopSettings = LoopSettings()
    review: ReviewSettings = ReviewSettings()
    budget: Budget = Budget()
    ablation: Ablation = "none"
    baseline: Baseline | None = None
    # --baseline compile: tasks whose torch.compile(Model) is compiled into Inductor's cache at once, before anything
    # is timed (0: none; the baseline reviews then compile on the GPU's clock); None: half the CPU cores, at most 8
    warm_jobs: int | None = Field(None, ge=0)
    out: Path | None = None
    resume: bool = False
    ray: str | None = None  # a Ray cluster ("auto", "host:port", "ray://..."): evaluations are placed there


class BenchEvent(BaseModel):
    """Progress: a task started or ended (with its result), or a round of a task ended."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: Literal["start", "warm", "task_started", "task_done", "round"]
    task: str | None = None
    text: str = ""
    result: TaskResult | None = None
    total: int = 0


def refuse_replay(model: str) -> None:
    if model.startswith("replay:"):
        raise KernelSkillError(
            "bench cannot replay a transcript: a transcript holds one task's replies, and a benchmark's tasks ask "
            "concurrently. Replay one task with `kernelskill optimize PROBLEM.py --model replay:RUN_DIR`, or point "
            "bench at a model or a local OpenAI-compatible server"
        )


# how a resume reads bench's own settings from the run's config (loop/setup.py with_run_settings)
RUN_SETTINGS = {
    "problems": lambda config: Path(config["problems"]),
    "levels": lambda config: set(config["levels"]) if config.get("levels") else None,
    "indices": lambda config: set(config["tasks"]) if config.get("tasks") else None,
    "ablation": lambda config: config.get("ablation") or "none",
    "baseline": lambda config: config.get("baseline"),
}


def resolve(request: BenchRequest) -> BenchRequest:
    """The request a run starts or resumes with: on a resume, every setting not given is the run's own (its
    problems, tasks, model, rounds, budgets, review settings); a new run must name its problems and model."""
    if request.resume:
        if request.out is None:
            raise KernelSkillError("--resume needs --out RUN_DIR: the run folder of the run to continue")
        request = with_run_settings(request, "bench", RUN_SETTINGS)
    elif request.problems is None:
        raise KernelSkillError("bench needs --problems DIR: a KernelBench checkout or a folder of KernelBench-format "
                               "problem files")
    if not request.model:
        from kernelskill.llm.base import LLMError
        from kernelskill.llm.registry import no_model_message

        raise LLMError(no_model_message().replace("kernelskill optimize PROBLEM.py", "kernelskill bench --problems DIR"))
    if request.warm_jobs is not None and request.baseline != "compile":
        raise KernelSkillError("--warm-jobs sets how many torch.compile warm-ups run at once for --baseline compile; "
                               "add --baseline compile, or leave --warm-jobs out")
    return request


def continue_command(out: Path | str, *, gpus: list[str] | None = None, reviews_per_gpu: int | None = None,
                     parallel: int | None = None, ray: str | None = None, warm_jobs: int | None = None,
                     verbose: bool = False) -> str:
    """The command that continues an interrupted bench, ready to paste: the run's settings (problems, tasks, model,
    rounds, budgets, review settings) come from its folder; only where it runs (--gpus, --reviews-per-gpu,
    --parallel, --ray, --warm-jobs, -v), which the run does not keep, is repeated as given."""
    import shlex

    args = ["kernelskill", "bench", "--out", str(out), "--resume"]
    for flag, value in (("--gpus", ",".join(gpus) if gpus else None), ("--reviews-per-gpu", reviews_per_gpu),
                        ("--parallel", parallel), ("--ray", ray), ("--warm-jobs", warm_jobs)):
        if value is not None:
            args += [flag, str(value)]
    return shlex.join(args + (["--verbose"] if verbose else []))


def run_bench(
    request: BenchRequest,
    *,
    client: LLMClient | None = None,
    evaluator: Evaluator | None = None,
    on_event: Callable[[BenchEvent], None] = lambda e: None,
    stop: threading.Event | None = None,
) -> BenchResults:
    """Run (or resume) the benchmark. `client` and `evaluator` replace the real ones in tests."""
    request = resolve(request)
    assert request.problems is not None and request.model is not None
    if client is None:
        refuse_replay(request.model)
    tasks = discover(request.problems, request.levels, request.indices)
    loop = request.loop.ablated(request.ablation)
    review = request.review
    if request.baseline == "compile" and loop.rounds == 0:
        # no round can replace a seed: each seed's own review times torch.compile(Model) beside it, and the best
        # needs no second review
        review = review.model_copy(update={"baseline": "compile"})
    run_dir = request.out or Path("runs") / f"bench-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    stop = stop or threading.Event()
    evaluator = evaluator or _evaluator(request)
    with open_run(run_dir, "bench", resume=request.resume, evaluator=evaluator, backend=request.backend,
                  review=review) as run:  # fmt: skip
        store = run.store
        run_id, config = _run_row(store, request, loop, run.review, evaluator)
        config["run_dir"] = str(store.run_dir)
        config["run_id"] = run_id
        client = run.client(request.model, request.base_url, given=client)  # a missing key stops it here
        bench = _Bench(store, run_id, config, tasks, client, run.knowledge(loop), evaluator, loop, run.review,
                       request, on_event, stop)
        return bench.run()


def _evaluator(request: BenchRequest) -> Evaluator:
    """This machine's GPUs (--gpus, default all), or with --ray the GPUs of a Ray cluster (bench/cluster.py)."""
    if request.ray is None:
        return pooled_evaluator(request.review.device, request.backend, request.gpus,
                                request.reviews_per_gpu or REVIEWS_PER_GPU)
    from kernelskill.bench.cluster import connect

    if request.gpus is not None:
        raise KernelSkillError("--gpus picks GPUs of this machine; with --ray the cluster places each evaluation "
                               "on one of its own GPUs (leave --gpus out)")
    if request.reviews_per_gpu is not None:
        raise KernelSkillError("--reviews-per-gpu shares this machine's GPUs; with --ray each evaluation has a GPU "
                               "of the cluster to itself (leave --reviews-per-gpu out)")
    return connect(request.ray, request.review.device)


def _run_row(store: RunStore, request: BenchRequest, loop: LoopSettings, review: ReviewSettings,
             evaluator: Evaluator) -> tuple[int, dict]:
    config = {
        "problems": str(request.problems), "levels": sorted(request.levels or []) or None,
        "tasks": sorted(request.indices or []) or None, "model": request.model, "base_url": redact_url(request.base_url),
        "backend": request.backend, "device": evaluator.device, "ablation": request.ablation,
        "baseline": request.baseline, "seeds": loop.seeds, "rounds": loop.rounds,
        "loop": loop.model_dump(mode="json"), "review": review.model_dump(mode="json"),
        "budget": request.budget.model_dump(mode="json"), "kernelskill": __version__,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **evaluator.placement(),  # which GPUs, or which cluster, placed the evaluations
    }
    if not request.resume:
        assert request.model is not None
        return store.add_run("bench", request.model, config), config
    # one run folder never mixes two problem sets or protocols; more rounds or a larger budget may be asked for
    run = resume_stored_run(store, "bench", config)
    return run.id, dict(run.config)


class _Bench:
    def __init__(self, store: RunStore, run_id: int, config: dict, tasks: list[BenchTask], client: LLMClient, kb,
                 evaluator: Evaluator, loop: LoopSettings, review_settings: ReviewSettings, request: BenchRequest,
                 on_event: Callable[[BenchEvent], None], stop: threading.Event) -> None:
        self.store, self.run_id, self.config, self.tasks = store, run_id, config, tasks
        self.client, self.kb, self.evaluator, self.loop = client, kb, evaluator, loop
        self.review_settings, self.request = review_settings, request
        self.on_event, self.stop = on_event, stop
        self.profiles = wants_profiles(loop, evaluator)
        self.results: dict[str, TaskResult] = {}
        self.lock = threading.Lock()
        self.fatal: BaseException | None = None

    # ---- the run -------------------------------------------------------------------------------------------------

    def run(self) -> BenchResults:
        for t in self.tasks:  # every task is in the store before any runs, so a resumed run sees the same list
            if self.store.find_task(self.run_id, t.name) is None:
                try:
                    source = t.path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    source = f"<unreadable: {exc}>"
                self.store.add_task(self.run_id, t.name, str(t.path), source)
            # a resumed run's finished tasks are in results.json from the start, not only once the task loop reaches
            # them: a resume interrupted before that (in the compile warm-up) would write them all as pending
            row = self.store.find_task(self.run_id, t.name)
            self.results[t.name] = (TaskResult.model_validate(row.summary) if row.status in ("finished", "failed")
                                    and row.summary else self._pending(t))
        where = self.evaluator.describe()
        text = f"run folder {self.store.run_dir}" + (f"\n{where}" if where else "")
        self.on_event(BenchEvent(kind="start", total=len(self.tasks), text=text))
        parallel = self.request.parallel or 2 * self.evaluator.slots
        executor = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="task")
        try:
            if self.request.baseline == "compile":
                self._warm_compile()
            futures = [executor.submit(self._task, t) for t in self.tasks]
            for f in futures:
                while not f.done():
                    time.sleep(0.2)  # short waits keep Ctrl-C responsive
        except KeyboardInterrupt:
            # finish the rounds in flight, then stop: every task stays resumable
            self.stop.set()
            self.store.set_run_status(self.run_id, "interrupted")
            executor.shutdown(wait=True, cancel_futures=True)
            self._write()
            raise
        executor.shutdown(wait=True)
        if self.fatal is not None:
            self.store.set_run_status(self.run_id, "failed")
            self._write()
            raise self.fatal
        self.config["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        results = self._write()
        self.store.set_run_status(self.run_id, "interrupted" if self.stop.is_set() else "finished")
        return results

    def _write(self) -> BenchResults:
        with self.lock:
            results = build_results(self.config, [self.results[t.name] for t in self.tasks])
            write_results(self.store.run_dir / "results.json", results)
        return results

    def _warm_compile(self) -> None:
        """--baseline compile: compile every unfinished task's torch.compile(Model) into Inductor's cache first,
        `warm_jobs` at a time on the CPU cores, with nothing timed meanwhile, so each baseline review loads its graphs
        instead of compiling them (tens of seconds each) while it holds the GPU. A failed warm-up costs nothing: that
        task's baseline review compiles for itself and says what failed."""
        jobs = self.request.warm_jobs
        if jobs is None:
            jobs = max(1, min(8, (os.cpu_count() or 2) // 2))
        todo = [t for t in self.tasks if self.store.find_task(self.run_id, t.name).status not in ("finished", "failed")]
        if jobs == 0 or not todo or self.stop.is_set():
            return
        start = time.monotonic()
        first = self._warm_one(todo[0])
        if first is None:
            return  # not done by this evaluator (a Ray cluster: each node compiles in its own reviews)
        self.on_event(BenchEvent(kind="warm", text=f"torch.compile(Model) of {len(todo)} tasks into Inductor's cache, "
                                               f"{jobs} at a time, before anything is timed"))
        self._warmed(todo[0], first)
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="warm")
        futures = {pool.submit(self._warm_one, t): t for t in todo[1:]}
        try:
            for f in futures:
                while not f.done():
                    time.sleep(0.2)  # short waits keep Ctrl-C responsive
                self._warmed(futures[f], f.result())
        except KeyboardInterrupt:  # the warm-ups in flight end with this process (their workers die with it)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        self.on_event(BenchEvent(kind="warm", text=f"Inductor's cache warmed in {time.monotonic() - start:.0f} s"))

    def _warm_one(self, t: BenchTask):
        from kernelskill.review.reviewer import Warmed

        try:
            return self.evaluator.warm_compile(t.path, self.review_settings,
                                               self.store.run_dir / "reviews" / safe_name(t.name) / "baseline-compile")
        except Exception as exc:  # noqa: BLE001 - a task's warm-up failing costs that warm-up, never the run
            return Warmed(0.0, error=f"{type(exc).__name__}: {exc}")

    def _warmed(self, t: BenchTask, w) -> None:
        text = (f"torch.compile warm-up failed: {w.error.strip().splitlines()[-1][:300] if w.error else '?'}"
                if w.warmup is None else f"compiled in {w.warmup.seconds:.1f} s ({w.warmup.cache_words()})")
        if w.retried:
            text += " (made again in a fresh worker after failing in a used one)"
        self.on_event(BenchEvent(kind="warm", task=t.name, text=text))

    # ---- one task ------------------------------------------------------------------------------------------------

    def _task(self, t: BenchTask) -> None:
        if self.stop.is_set() or self.fatal is not None:
            return
        row = self.store.find_task(self.run_id, t.name)
        if row.status in ("finished", "failed") and row.summary:
            self.results[t.name] = TaskResult.model_validate(row.summary)
            self.on_event(BenchEvent(kind="task_done", task=t.name, result=self.results[t.name], text="(resumed)"))
            self._write()
            return
        start = time.monotonic()
        self.on_event(BenchEvent(kind="task_started", task=t.name))
        try:
            result = self._optimize(t, row.id)
        except (LLMAuthError, SandboxUnavailable) as exc:  # every task would fail the same way: the run stops
            self.fatal = exc
            self.stop.set()
            self.store.set_task_status(row.id, "failed", reason=str(exc))
            return
        except ProblemError as exc:
            result = self._failed(t, f"bad problem file: {exc}")
        except Exception as exc:  # noqa: BLE001 - one task's failure is recorded; the run goes on
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            result = self._failed(t, f"{type(exc).__name__}: {exc}\n{''.join(tb[-3:])}".strip())
        result.seconds = round(time.monotonic() - start, 1)
        status = result.status if result.status in ("finished", "failed") else "running"
        self.store.set_task_status(row.id, status, reason=result.reason,
                                   summary=result.model_dump(mode="json") if status != "running" else None)
        self.results[t.name] = result
        self.on_event(BenchEvent(kind="task_done", task=t.name, result=result))
        self._write()

    def _optimize(self, t: BenchTask, task_id: int) -> TaskResult:
        problem = read_problem(t.path)
        check_problem(problem)  # a problem that cannot run (in a confined child) fails its task before any model is asked

        def on_event(e: Event) -> None:
            if e.kind == "round" and e.record is not None:
                self.on_event(BenchEvent(kind="round", task=t.name, text=_round_text(e)))

        ctx = task_context(self.store, self.run_id, task_id, problem, self.client, self.request.budget, self.kb,
                           self.review_settings, self.loop, self.evaluator, on_event, profiles=self.profiles,
                           stop=self.stop)
        state = TaskRunner(ctx).run()
        interrupted = self.stop.is_set() and state.round < self.loop.rounds and state.ended is None
        return self._result(t, task_id, state, interrupted)

    # ---- results -------------------------------------------------------------------------------------------------

    def _result(self, t: BenchTask, task_id: int, state: LoopState, interrupted: bool) -> TaskResult:
        best, best_path = state.best, None
        compile_ms = vs_compile = vs_compile_paced = None
        flags: list[str] = []
        if best is not None:
            dest = write_atomically(self.store.run_dir / "best" / f"{safe_name(t.name)}.py", best.source)
            best_path = str(dest.relative_to(self.store.run_dir))
            if self.request.baseline == "compile":  # first, so its seconds are in the task's stage totals
                compile_ms, vs_compile, vs_compile_paced, flags = self._compile_baseline(t, best)
        outcome = summarize(self.store, task_id, state, best_path=best_path)
        new = [f for f in flags if f not in outcome.flags]  # the kernel's own review may have said it already
        return TaskResult.model_validate({
            **dict(outcome), "flags": outcome.flags + new, "name": t.name, "level": t.level, "index": t.index,
            "problem": str(t.path), "task_id": task_id, "status": "running" if interrupted else "finished",
            "compile_ms": compile_ms, "speedup_vs_compile": vs_compile,
            "speedup_vs_compile_host_paced": vs_compile_paced,
        })

    def _compile_baseline(self, t: BenchTask, best) -> tuple[float | None, float | None, float | None, list[str]]:
        """torch.compile(Model) timed beside the best kernel: from the kernel's own review when the reviews already
        timed it (--rounds 0), else one more review of the kernel, stored as its 'baseline' review. (compile_ms,
        speedup vs compile, the same at the launches' pace, flags to add)."""
        from kernelskill.candidate import parse_candidate

        paced = lambda result: (result.get("timing") or {}).get("speedup_vs_compile_host_paced")  # noqa: E731
        if self.review_settings.baseline == "compile":  # the kernel's own review timed torch.compile beside it
            own = self.store.review_of(best.candidate_id)
            if own is not None and own.correct and own.compile_ms and own.candidate_ms:
                return own.compile_ms, own.compile_ms / own.candidate_ms, paced(own.result), []
            said = [f for f in (own.flags if own else []) if f.startswith("compile_baseline_failed")]
            if said:
                return None, None, None, said
        settings = self.review_settings.model_copy(update={"baseline": "compile"})
        log_dir = self.store.run_dir / "reviews" / safe_name(t.name) / "baseline-compile"
        candidate = parse_candidate(best.source, self.store.run_dir / best.path)
        result = self.evaluator.review(t.path, candidate, settings, log_dir)
        self.store.add_review(best.candidate_id, result.model_dump(mode="json"), purpose="baseline")
        if not result.correct or result.compile_ms is None or result.candidate_ms is None:
            said = [f for f in result.flags if f.startswith("compile_baseline_failed")]  # the compile's own failure
            return None, None, None, said or [f"compile_baseline_failed: {(result.error or 'no timing')[:200]}"]
        return (result.compile_ms, result.compile_ms / result.candidate_ms,
                result.timing.speedup_vs_compile_host_paced if result.timing else None, [])

    def _pending(self, t: BenchTask) -> TaskResult:
        return self._without_kernel(t, "pending")

    def _failed(self, t: BenchTask, reason: str) -> TaskResult:
        return self._without_kernel(t, "failed", reason)

    def _without_kernel(self, t: BenchTask, status: str, reason: str | None = None) -> TaskResult:
        row = self.store.find_task(self.run_id, t.name)
        return TaskResult(name=t.name, level=t.level, index=t.index, problem=str(t.path), status=status,
                          reason=reason, success=False, best_speedup=None, task_id=row.id if row else None)


def _round_text(e: Event) -> str:
    from kernelskill.loop.display import round_line

    return round_line(e.record)

