"""The benchmark scheduler: tasks run concurrently, each through the loop; reviews and profiles take a GPU from the
pool (one evaluation per GPU at a time) while other tasks wait on their LLM calls. With `ray` set, they take a GPU
of a Ray cluster instead (cluster.py), and their results and logs land in the same run folder.

A failing task (a malformed problem file, a model unreachable past its retries, anything that raises) is recorded
with its reason and the run goes on; only a rejected API key stops the run, since every task would fail the same way.
After every finished task `results.json` is rewritten, so an interrupted run still has its results so far, and
`--resume` skips finished tasks and continues unfinished ones from their last finished round.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kernelskill import __version__
from kernelskill.bench.discover import BenchTask, discover
from kernelskill.bench.gpus import GpuPool
from kernelskill.errors import KernelSkillError, ProblemError
from kernelskill.llm.accounting import Budget
from kernelskill.llm.base import LLMAuthError, LLMClient
from kernelskill.loop.optimize import real_prebuild, real_reviewer, task_context
from kernelskill.loop.runner import Event, Reviewer, TaskRunner
from kernelskill.loop.settings import LoopSettings
from kernelskill.loop.state import LoopState
from kernelskill.problem import check_problem, read_problem
from kernelskill.redact import redact_url
from kernelskill.report.results import BenchResults, TaskResult, build_results, rounds_to_best_of, write_results
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore, add_stage_seconds, safe_name
from kernelskill.store.lock import hold_run_folder
from kernelskill.store.resume import refuse_changes

Ablation = Literal["none", "no-ltm", "no-stm", "no-memory"]


class BenchRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    problems: Path
    levels: set[str] | None = None
    indices: set[int] | None = None
    model: str
    base_url: str | None = None
    backend: str = "triton"
    gpus: list[str] | None = None  # None: every visible GPU (or the CPU)
    parallel: int | None = None  # tasks in flight; None: 2 per GPU, so LLM waits overlap evaluations
    loop: LoopSettings = LoopSettings()
    review: ReviewSettings = ReviewSettings()
    budget: Budget = Budget()
    ablation: Ablation = "none"
    baseline: Literal["compile"] | None = None
    out: Path | None = None
    resume: bool = False
    ray: str | None = None  # a Ray cluster ("auto", "host:port", "ray://..."): evaluations are placed there


class BenchEvent(BaseModel):
    """Progress: a task started or ended (with its result), or a round of a task ended."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: Literal["start", "task_started", "task_done", "round"]
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


def apply_ablation(loop: LoopSettings, ablation: Ablation) -> LoopSettings:
    return loop.model_copy(update={
        "long_term_memory": ablation not in ("no-ltm", "no-memory"),
        "short_term_memory": ablation not in ("no-stm", "no-memory"),
    })


def run_bench(
    request: BenchRequest,
    *,
    client: LLMClient | None = None,
    reviewer: Reviewer | None = None,
    on_event: Callable[[BenchEvent], None] = lambda e: None,
    stop: threading.Event | None = None,
) -> BenchResults:
    from kernelskill.llm.registry import make_client
    from kernelskill.review.reviewer import resolve_device

    if client is None:
        refuse_replay(request.model)
    tasks = discover(request.problems, request.levels, request.indices)
    cluster = _connect(request) if request.ray is not None else None
    device = cluster.device if cluster is not None else resolve_device(request.review.device)
    if device == "cpu" and request.backend == "cuda":
        raise KernelSkillError("--backend cuda needs a GPU (on this machine CUDA kernels can only be compile-checked)")
    if device == "cuda" and request.backend == "cuda" and cluster is None and reviewer is None:
        from kernelskill.review.reviewer import prepare_builds

        prepare_builds()
    gpus = request.gpus
    if device == "cuda" and gpus is None:
        import torch

        gpus = [str(i) for i in range(torch.cuda.device_count())]
    if device == "cpu":
        gpus = None
    pool = GpuPool(gpus)
    loop = apply_ablation(request.loop, request.ablation)
    review_settings = request.review.model_copy(update={"device": device, "backend": request.backend})
    run_dir = request.out or Path("runs") / f"bench-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    stop = stop or threading.Event()
    # one writer per run folder (store/lock.py): two `bench --resume` of one folder would run every task twice
    with hold_run_folder(run_dir, create=not request.resume, command="bench"), \
            (RunStore.open(run_dir) if request.resume else RunStore.create(run_dir)) as store, \
            (cluster or nullcontext()):
        run_id, config = _run_row(store, request, loop, review_settings, device, gpus, cluster)
        config["run_dir"] = str(store.run_dir)
        config["run_id"] = run_id
        if client is None:
            client = make_client(request.model, request.base_url)
        kb = None
        if loop.long_term_memory:
            from kernelskill.memory.knowledge import load_knowledge

            kb = load_knowledge()
        bench = _Bench(store, run_id, config, tasks, client, kb, pool, loop, review_settings, request, device,
                       reviewer or real_reviewer, on_event, stop, cluster)
        return bench.run()


def _connect(request: BenchRequest):
    """The Ray cluster that places this run's evaluations (bench/cluster.py)."""
    from kernelskill.bench.cluster import connect

    if request.gpus is not None:
        raise KernelSkillError("--gpus picks GPUs of this machine; with --ray the cluster places each evaluation "
                               "on one of its own GPUs (leave --gpus out)")
    return connect(request.ray, request.review.device)


def _run_row(store: RunStore, request: BenchRequest, loop: LoopSettings, review: ReviewSettings, device: str,
             gpus: list[str] | None, cluster=None) -> tuple[int, dict]:
    config = {
        "problems": str(request.problems), "levels": sorted(request.levels or []) or None,
        "tasks": sorted(request.indices or []) or None, "model": request.model, "base_url": redact_url(request.base_url),
        "backend": request.backend, "device": device, "gpus": gpus, "ablation": request.ablation,
        "baseline": request.baseline, "seeds": loop.seeds, "rounds": loop.rounds,
        "loop": loop.model_dump(mode="json"), "review": review.model_dump(mode="json"),
        "budget": request.budget.model_dump(mode="json"), "kernelskill": __version__,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if cluster is not None:  # which backend placed the evaluations (absent: this machine's GPU pool)
        config.update(placement="ray", ray=cluster.summary())
    if not request.resume:
        return store.add_run("bench", request.model, config), config
    run = store.latest_run()
    if run is None or run.kind != "bench":
        raise KernelSkillError(f"{store.db_path} holds no bench run to resume")
    refuse_changes(store.run_dir, run.config, config)  # one run folder never mixes two problem sets or protocols
    store.set_run_status(run.id, "running")
    return run.id, dict(run.config)


class _Bench:
    def __init__(self, store, run_id, config, tasks, client, kb, pool, loop, review_settings, request, device,
                 reviewer, on_event, stop, cluster=None) -> None:
        self.store, self.run_id, self.config, self.tasks = store, run_id, config, tasks
        self.client, self.kb, self.pool, self.loop = client, kb, pool, loop
        self.review_settings, self.request, self.device = review_settings, request, device
        self.reviewer, self.on_event, self.stop = reviewer, on_event, stop
        self.cluster = cluster  # a RayEvaluator: evaluations go to the cluster instead of the pool
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
            self.results[t.name] = self._pending(t)
        text = f"run folder {self.store.run_dir}"
        if self.cluster is not None:
            text += "\n" + self.cluster.describe()
        self.on_event(BenchEvent(kind="start", total=len(self.tasks), text=text))
        parallel = self.request.parallel or 2 * (self.cluster.slots if self.cluster is not None else self.pool.slots)
        executor = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="task")
        try:
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
        except LLMAuthError as exc:
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
        check_problem(problem)  # a problem that cannot run fails its task before any model is asked

        def on_event(e: Event) -> None:
            if e.kind == "round" and e.record is not None:
                self.on_event(BenchEvent(kind="round", task=t.name, text=_round_text(e)))

        stages: dict[str, float] = {}

        def reviewer(problem_path: Path, candidate, settings: ReviewSettings, log_dir: Path):
            result = self._pooled_review(problem_path, candidate, settings, log_dir)
            add_stage_seconds(stages, result.stage_seconds)
            return result

        ctx = task_context(
            self.store, self.run_id, task_id, problem, self.client, self.request.budget, self.kb,
            self.review_settings, self.loop, reviewer, self._profiler(stages), on_event, self.device,
            prebuild=self._prebuild(stages),
        )
        ctx.stop = self.stop
        state = TaskRunner(ctx).run()
        state.restate_history()
        interrupted = self.stop.is_set() and state.round < self.loop.rounds and state.ended is None
        result = self._result(t, task_id, state, interrupted, stages)
        result.stage_seconds = {k: round(v, 3) for k, v in sorted(stages.items())}
        return result

    def _pooled_review(self, problem: Path, candidate, settings: ReviewSettings, log_dir: Path):
        """A review on a GPU of the pool (or, with --ray, of the cluster); the worker sees only that GPU. The time it
        waited for the GPU is in the result's stage seconds as `queue`."""
        from kernelskill.review.reviewer import review

        waited: dict[str, float] = {}
        if self.cluster is not None and self.reviewer is real_reviewer:
            result = self.cluster.review(problem, candidate, settings, log_dir, waited)
        else:
            queued = time.monotonic()
            with self.pool.acquire() as env:
                waited["queue"] = time.monotonic() - queued
                if self.reviewer is real_reviewer:
                    result = review(problem, candidate, settings, log_dir=log_dir, env=env)
                else:
                    result = self.reviewer(problem, candidate, settings, log_dir)  # tests: a scripted reviewer
        result.stage_seconds["queue"] = round(result.stage_seconds.get("queue", 0.0) + waited.get("queue", 0.0), 3)
        return result

    def _prebuild(self, stages: dict[str, float]):
        """CUDA candidates build on this machine's CPU cores before they wait for a GPU (not with --ray: the build
        cache is per machine, so a remote node builds for itself)."""
        if self.reviewer is not real_reviewer or self.cluster is not None or self.device != "cuda":
            return None

        def prebuild(problem: Path, candidate, settings: ReviewSettings, log_dir: Path):
            built = real_prebuild(problem, candidate, settings, log_dir)
            if built is not None:  # (a compile failure found by the build never reaches a GPU)
                stages["prebuild"] = stages.get("prebuild", 0.0) + built.seconds
            return built

        return prebuild

    def _profiler(self, stages: dict[str, float]):
        if self.device != "cuda" or not self.loop.long_term_memory or self.loop.profile == "off":
            return None
        from kernelskill.memory.profiling import ProfileSettings, find_ncu

        if (find_ncu("ncu") is None) if self.cluster is None else not self.cluster.has_ncu:
            if self.loop.profile == "on":
                where = "" if self.cluster is None else " on every GPU node of the Ray cluster"
                raise KernelSkillError(f"--profile on needs Nsight Compute (`ncu` on PATH){where}")
            return None

        def profile(problem: Path, candidate: Path, kb):
            from kernelskill.memory.collect import profile_candidate

            if self.cluster is not None:
                keep = self.store.run_dir / "profiles" / candidate.parent.name / candidate.stem
                return self.cluster.profile(problem, candidate, kb, keep, stages)
            queued = time.monotonic()
            with self.pool.acquire() as env:
                start = time.monotonic()
                stages["queue"] = stages.get("queue", 0.0) + start - queued
                keep = self.store.run_dir / "profiles" / candidate.parent.name / candidate.stem
                try:
                    return profile_candidate(problem, candidate, kb, ProfileSettings(keep_dir=keep, env=env))
                finally:
                    stages["profile"] = stages.get("profile", 0.0) + time.monotonic() - start

        return profile

    # ---- results -------------------------------------------------------------------------------------------------

    def _result(self, t: BenchTask, task_id: int, state: LoopState, interrupted: bool,
                stages: dict[str, float]) -> TaskResult:
        totals = self.store.llm_totals(task_id)
        best = state.best
        flags: list[str] = []
        best_path = eager_ms = compile_ms = vs_compile = None
        rounds_to_best = None
        if best is not None:
            review = self.store.review_of(best.candidate_id)
            if review is not None:
                flags = list(review.result.get("flags") or [])
            dest = self.store.run_dir / "best" / f"{safe_name(t.name)}.py"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(best.source)
            best_path = str(dest.relative_to(self.store.run_dir))
            rounds_to_best = rounds_to_best_of([h.model_dump(mode="json") for h in state.history])
            eager_ms = state.reference_ms()
            if self.request.baseline == "compile":
                compile_ms, vs_compile, flags = self._compile_baseline(t, best, flags, stages)
        cost = totals["cost_usd"] if totals["calls"] > totals["unpriced_calls"] else None
        strict, kernelbench = self._success_by_rules(task_id)
        return TaskResult(
            name=t.name, level=t.level, index=t.index, problem=str(t.path), task_id=task_id,
            verdict="correct" if best is not None else (state.history[-1].verdict if state.history else None),
            status="running" if interrupted else "finished", reason=state.ended, success=best is not None,
            success_strict=strict, success_kernelbench=kernelbench,
            best_speedup=state.speedup_of(best), best_ms=best.ms if best else None, eager_ms=eager_ms,
            compile_ms=compile_ms, speedup_vs_compile=vs_compile, best_path=best_path, flags=flags,
            rounds_run=state.round, rounds_to_best=rounds_to_best, llm_calls=totals["calls"],
            tokens=totals["tokens"], cost_usd=cost, history=[h.model_dump(mode="json") for h in state.history],
        )

    def _success_by_rules(self, task_id: int) -> tuple[bool | None, bool | None]:
        """Whether any kernel of the task was correct under strict and under kernelbench rules (None, None when no
        review recorded its policy verdicts)."""
        policies = [r.result.get("policy") for c in self.store.candidates(task_id)
                    if (r := self.store.review_of(c.id)) is not None]
        policies = [p for p in policies if p]
        if not policies:
            return None, None
        return any(p["correct_strict"] for p in policies), any(p["correct_kernelbench"] for p in policies)

    def _compile_baseline(self, t: BenchTask, best, flags: list[str], stages: dict[str, float]):
        """One more review of the best kernel, also timing torch.compile(Model) the same way."""
        from kernelskill.candidate import parse_candidate

        settings = self.review_settings.model_copy(update={"baseline": "compile"})
        log_dir = self.store.run_dir / "reviews" / safe_name(t.name) / "baseline-compile"
        result = self._pooled_review(t.path, parse_candidate(best.source, self.store.run_dir / best.path), settings,
                                     log_dir)
        add_stage_seconds(stages, result.stage_seconds)
        if not result.correct or result.compile_ms is None or result.candidate_ms is None:
            return None, None, flags + [f"compile_baseline_failed: {(result.error or 'no timing')[:200]}"]
        return result.compile_ms, result.compile_ms / result.candidate_ms, flags

    def _pending(self, t: BenchTask) -> TaskResult:
        return TaskResult(name=t.name, level=t.level, index=t.index, problem=str(t.path), status="pending",
                          success=False, best_speedup=None, task_id=self._task_id(t))

    def _failed(self, t: BenchTask, reason: str) -> TaskResult:
        return TaskResult(name=t.name, level=t.level, index=t.index, problem=str(t.path), status="failed",
                          reason=reason, success=False, best_speedup=None, task_id=self._task_id(t))

    def _task_id(self, t: BenchTask) -> int | None:
        row = self.store.find_task(self.run_id, t.name)
        return row.id if row else None


def _round_text(e: Event) -> str:
    from kernelskill.loop.display import round_line

    return round_line(e.record)

