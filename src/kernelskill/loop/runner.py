"""One task through the loop: seeds, then rounds that repair the latest failure or optimize the base.

Every step lands in the run store as it happens: each candidate (file and row), its review, each decision and each
LLM call; after each round the loop's whole state is snapshotted, so `--resume` restarts from the last finished round.
A bad reply costs its round, never the run; a spent budget or an unreachable model ends the task cleanly with its
best kernel kept.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelskill.agents.context import (
    Attempt,
    Diagnosis,
    OptimizeContext,
    Plan,
    PlanContext,
    RepairContext,
    RepairStep,
    ReviewFeedback,
)
from kernelskill.agents.team import AgentFailure, LLMFeatureJudge
from kernelskill.candidate import parse_candidate
from kernelskill.errors import CandidateError
from kernelskill.llm.base import BudgetExceeded, LLMAuthError, LLMError
from kernelskill.llm.scripted import ReplayExhausted
from kernelskill.loop.context import Event, TaskContext
from kernelskill.loop.feedback import decision_brief, failed_feedback, reason_of, review_feedback, verdict_of
from kernelskill.loop.state import KernelRef, LoopState, promotion
from kernelskill.memory.features.codeview import build_view
from kernelskill.memory.features.extract import extract_features
from kernelskill.memory.policy.advise import advise
from kernelskill.memory.policy.collect import with_problem
from kernelskill.memory.policy.evidence import Evidence, TriedMethod
from kernelskill.review.rules import RuleSet
from kernelskill.store import safe_name
from kernelskill.loop.outcome import NO_CANDIDATE, RoundRecord, repair_rank


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _text(value: str | list[str] | dict) -> str:
    if isinstance(value, list):
        return "\n".join(f"{i}. {step}" for i, step in enumerate(value, 1))
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v}" for k, v in value.items())
    return value


class _RoundFailed(Exception):
    """The agents produced no usable candidate this round (the reply could not be used after the re-ask)."""


class TaskRunner:
    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx
        self.state = LoopState()
        self._evidence: dict[str, Evidence] = {}  # base source sha -> profile evidence (not persisted: re-profiled)
        self._history_lock = threading.Lock()

    # ---- entry ---------------------------------------------------------------------------------------------------

    def run(self) -> LoopState:
        """Run (or resume) the task to its last round. Raises only what the user must fix (a rejected API key)."""
        ctx, store = self.ctx, self.ctx.store
        store.abandon_unfinished_rounds(ctx.task_id)
        last = store.last_state(ctx.task_id)
        if last is not None:
            self.state = LoopState.model_validate(last[1])
            ctx.on_event(Event("phase", f"resuming after round {self.state.round}", state=self.state))
        store.set_task_status(ctx.task_id, "running")
        try:
            if last is None:
                self._seed_phase()
            while self.state.ended is None and self.state.round < ctx.settings.rounds:
                if ctx.stop is not None and ctx.stop.is_set():
                    break
                self._round(self.state.round + 1)
        except LLMAuthError:
            store.set_task_status(ctx.task_id, "failed", reason="the model rejected the API key")
            raise
        return self.state

    # ---- seeds ---------------------------------------------------------------------------------------------------

    def _seed_phase(self) -> None:
        ctx, store = self.ctx, self.ctx.store
        round_id = store.start_round(ctx.task_id, 0, "seed")
        n = ctx.settings.seeds
        ctx.on_event(Event("phase", f"generating {n} seed kernel{'s' if n > 1 else ''}"))
        if ctx.settings.parallel_seeds and not ctx.replayed and n > 1:
            with ThreadPoolExecutor(max_workers=n, thread_name_prefix="seed") as pool:
                outcomes = list(pool.map(lambda k: self._seed(round_id, k), range(1, n + 1)))
        else:
            outcomes = [self._seed(round_id, k) for k in range(1, n + 1)]
        stop = next((o for o in outcomes if isinstance(o, BaseException)), None)
        refs = [o for o in outcomes if isinstance(o, KernelRef)]
        correct = [r for r in refs if r.feedback.correct and r.ms is not None]
        st = self.state
        st.history.sort(key=lambda rec: (rec.round, rec.slot))
        if correct:
            top = min(correct, key=lambda r: r.compare_ms if r.compare_ms is not None else float("inf"))
            st.best = st.base = top
            for rec in st.history:
                if rec.label == top.label:
                    rec.promoted = "best+base"
        elif refs:
            # no correct seed: repair the most promising failure (one that compiled, else the first)
            st.failing = min(refs, key=lambda r: repair_rank(r.feedback.error_kind))
        for rec in st.history:
            rec.best_speedup = st.speedup_of(st.best)
        self._commit_kernels()
        if isinstance(stop, BudgetExceeded | LLMError):
            st.ended = str(stop)
        status = "done" if refs else "failed"
        store.finish_round(round_id, status, note=f"{len(correct)} of {n} seeds correct",
                           state=st.model_dump(mode="json"))
        for rec in [r for r in st.history if r.round == 0]:
            ctx.on_event(Event("round", record=rec, state=st))
        if isinstance(stop, LLMAuthError):
            raise stop

    def _seed(self, round_id: int, k: int) -> KernelRef | BaseException | None:
        ctx = self.ctx
        tag = {"round": 0, "slot": k, "round_id": round_id}
        try:
            source = ctx.team.generate(ctx.task, seed=k, seeds=ctx.settings.seeds, tag=tag)
        except AgentFailure as exc:
            self._record(RoundRecord(round=0, slot=k, branch="seed", verdict=NO_CANDIDATE,
                                     note=f"generator reply unusable: {exc.errors[-1] if exc.errors else exc}"))
            return None
        except LLMError as exc:  # budget, outage, auth: stop asking; the seeds already made are kept
            self._record(RoundRecord(round=0, slot=k, branch="seed", verdict=NO_CANDIDATE, note=str(exc)))
            return exc
        ref = self._review(round_id, f"seed-{k}", source, origin="seed", parent=None)
        self._record(RoundRecord(round=0, slot=k, branch="seed", label=ref.label, verdict=verdict_of(ref.feedback),
                                 speedup=self.state.speedup_of(ref), ms=ref.ms, reason=reason_of(ref.feedback)))
        return ref

    # ---- rounds --------------------------------------------------------------------------------------------------

    def _round(self, i: int) -> None:
        ctx, st, store = self.ctx, self.state, self.ctx.store
        branch = "repair" if st.failing is not None else "optimize" if st.base is not None else "seed"
        round_id = store.start_round(ctx.task_id, i, branch)
        ctx.on_event(Event("phase", f"round {i}: {branch}"))
        record = RoundRecord(round=i, branch=branch, verdict=NO_CANDIDATE)
        tag = {"round": i, "slot": 0, "round_id": round_id}
        status = "done"
        try:
            if branch == "repair":
                self._repair(i, round_id, record, tag)
            elif branch == "optimize":
                self._optimize(i, round_id, record, tag)
            else:  # every seed failed to produce any code: ask for a fresh one
                source = ctx.team.generate(ctx.task, seed=1, seeds=1, tag={**tag, "slot": 1})
                ref = self._review(round_id, f"round-{i:02d}", source, origin="seed", parent=None)
                self._after_new_kernel(ref, record, method=None, goal=None)
        except _RoundFailed as exc:
            status, record.note = "failed", str(exc)
        except AgentFailure as exc:
            status = "failed"
            record.note = f"{exc.agent} reply unusable after a re-ask: {exc.errors[-1] if exc.errors else exc}"
        except BudgetExceeded as exc:
            status, record.note, st.ended = "failed", str(exc), str(exc)
        except LLMAuthError:
            store.finish_round(round_id, "abandoned", note="the model rejected the API key")
            raise
        except ReplayExhausted as exc:
            status, record.note, st.ended = "failed", str(exc), f"the replayed transcript has no more replies: {exc}"
        except LLMError as exc:  # the model stayed unreachable through every retry
            status, record.note, st.ended = "failed", str(exc), f"the model is unavailable: {exc}"
        st.round = i
        record.best_speedup = st.speedup_of(st.best)
        st.history.append(record)
        self._commit_kernels()
        store.finish_round(round_id, status, method=record.method, note=record.note or None,
                           outcome=record.model_dump(mode="json"), state=st.model_dump(mode="json"))
        ctx.on_event(Event("round", record=record, state=st))

    def _repair(self, i: int, round_id: int, record: RoundRecord, tag: dict) -> None:
        ctx, st = self.ctx, self.state
        failing = st.failing
        assert failing is not None
        rctx = RepairContext(
            task=ctx.task, failing_label=failing.label, failing_source=failing.source, feedback=failing.feedback,
            chain=list(st.chain) if ctx.settings.short_term_memory else [], goal=st.chain_goal,
        )
        ctx.on_event(Event("phase", f"round {i}: diagnosing {failing.label} ({verdict_of(failing.feedback)})"))
        diagnosis = ctx.team.diagnose(rctx, tag=tag)
        ctx.on_event(Event("phase", f"round {i}: repairing {failing.label}"))
        source = ctx.team.repair(rctx, diagnosis, tag=tag)
        record.method = st.chain_method
        ref = self._review(round_id, f"round-{i:02d}", source, origin="repair", parent=failing.candidate_id)
        link = RepairStep(label=failing.label, feedback=failing.feedback, diagnosis=diagnosis,
                          outcome=f"{ref.label}: {_outcome_words(ref.feedback)}")
        st.chain.append(link)
        self._after_new_kernel(ref, record, method=st.chain_method, goal=st.chain_goal, diagnosis=diagnosis)

    def _optimize(self, i: int, round_id: int, record: RoundRecord, tag: dict) -> None:
        ctx, st = self.ctx, self.state
        base = st.base
        assert base is not None
        decision_brief_, methods = None, None
        if ctx.settings.long_term_memory and ctx.kb is not None:
            decision_brief_, methods = self._decide(i, round_id, base, tag)
        pctx = PlanContext(
            task=ctx.task, base_label=base.label, base_source=base.source, base_feedback=base.feedback,
            decision=decision_brief_, methods=methods,
            attempts=list(st.attempts) if ctx.settings.short_term_memory else None,
        )
        ctx.on_event(Event("phase", f"round {i}: planning on base {base.label}"))
        plan = ctx.team.plan(pctx, tag=tag)
        record.method = plan.method
        card = ctx.kb.method(plan.method) if ctx.kb is not None else None
        ctx.on_event(Event("phase", f"round {i}: optimizer applies {plan.method}"))
        source = ctx.team.optimize(
            OptimizeContext(task=ctx.task, base_label=base.label, base_source=base.source, base_feedback=base.feedback,
                            plan=plan, method=card),
            tag=tag,
        )
        ref = self._review(round_id, f"round-{i:02d}", source, origin="optimize", parent=base.candidate_id)
        self._after_new_kernel(ref, record, method=plan.method, goal=_plan_text(plan))

    # ---- shared steps --------------------------------------------------------------------------------------------

    def _after_new_kernel(self, ref: KernelRef, record: RoundRecord, *, method: str | None, goal: str | None,
                          diagnosis: Diagnosis | None = None) -> None:
        """Update best, base, the repair chain and the optimization memory after `ref` was reviewed."""
        ctx, st = self.ctx, self.state
        record.label, record.verdict, record.speedup = ref.label, verdict_of(ref.feedback), st.speedup_of(ref)
        record.ms, record.reason = ref.ms, reason_of(ref.feedback)
        came_from_chain = st.failing is not None
        if not ref.feedback.correct or ref.ms is None:
            if not came_from_chain:  # a new chain starts at this kernel
                st.chain, st.chain_method, st.chain_goal = [], method, goal
                st.chain_base_speedup = st.speedup_of(st.base)
            st.failing = ref
            if st.base is not None and len(st.chain) >= ctx.settings.max_repairs:
                # give up on this optimization: back to the base, and remember that it failed
                self._remember(Attempt(label=ref.label, method=st.chain_method or "repair", plan=st.chain_goal or "",
                                       outcome="failed", base_speedup=st.chain_base_speedup,
                                       detail=f"still failing after {len(st.chain)} repairs: "
                                              f"{_outcome_words(ref.feedback)}"))
                record.note = f"gave up after {len(st.chain)} repairs; back to base {st.base.label}"
                self._end_chain()
            return
        # a correct kernel
        n_repairs = len(st.chain) if came_from_chain else 0
        chain_method, chain_goal = st.chain_method, st.chain_goal
        if came_from_chain:
            self._end_chain()
            method, goal = chain_method, chain_goal
        assert ref.compare_ms is not None
        is_best, is_base = promotion(ref.compare_ms, st.best, st.base, st.reference_ms() or 1.0, ctx.settings.rt,
                                     ctx.settings.at)
        old_base = st.base
        if is_best:
            st.best = ref
        if method is not None and old_base is not None:
            outcome = "promoted" if is_base else "improved" if ref.compare_ms < (old_base.compare_ms or 0) else "not_faster"
            self._remember(Attempt(label=ref.label, method=method, plan=goal or "", outcome=outcome,
                                   speedup=st.speedup_of(ref), base_speedup=st.speedup_of(old_base),
                                   detail=f"fixed after {n_repairs} repair{'s' if n_repairs != 1 else ''}"
                                   if n_repairs else ""))
        if is_base:
            st.base = ref
            st.attempts = []  # the optimization memory belongs to the base it was tried on
        record.promoted = "best+base" if is_best and is_base else "best" if is_best else "base" if is_base else None

    def _remember(self, attempt: Attempt) -> None:
        self.state.attempts.append(attempt)

    def _end_chain(self) -> None:
        st = self.state
        st.failing, st.chain, st.chain_method, st.chain_goal, st.chain_base_speedup = None, [], None, None, None

    def _review(self, round_id: int, label: str, source: str, *, origin: str, parent: int | None) -> KernelRef:
        """Store the candidate, review it (one evaluation on the device at a time), store the review."""
        ctx, store = self.ctx, self.ctx.store
        taken = {c.label for c in store.candidates(ctx.task_id)}
        if label in taken:  # a resumed run redoes the round that was in flight: keep the abandoned kernel's row
            label = next(f"{label}-redo{n}" for n in range(2, 10_000) if f"{label}-redo{n}" not in taken)
        row = store.add_candidate(ctx.task_id, round_id, label, source, origin=origin, parent_id=parent)
        path = store.run_dir / row.path
        ctx.on_event(Event("phase", f"reviewing {label}"))
        try:
            candidate = parse_candidate(source, path)
        except CandidateError as exc:
            feedback = failed_feedback("bad_candidate", str(exc))
            return KernelRef(candidate_id=row.id, label=label, path=row.path, source=source, feedback=feedback)
        # Under --rules kernelbench any working ModelNew counts, as in KernelBench's harness (published kernels are
        # often plain PyTorch, or Triton in a CUDA task): the review judges it as it is.
        if (candidate.syntax_error is None
                and not RuleSet.of(ctx.review_settings.rules).accepts_backend(candidate.backend, ctx.task.backend)):
            feedback = failed_feedback(
                "wrong_backend",
                f"this task asks for a {ctx.task.backend} kernel, but the candidate is "
                f"{'plain PyTorch (no kernel)' if candidate.backend == 'none' else candidate.backend}: write the "
                f"kernel in {'Triton (@triton.jit)' if ctx.task.backend == 'triton' else 'CUDA C++ via load_inline'}",
            )
            return KernelRef(candidate_id=row.id, label=label, path=row.path, source=source, feedback=feedback)
        log_dir = store.run_dir / "reviews" / safe_name(ctx.task.name) / label
        built = ctx.evaluator.prebuild(ctx.problem_path, candidate, ctx.review_settings, log_dir)
        if built is not None and built.result is not None:  # it does not compile: no need to wait for the device
            result = built.result
        else:
            result = ctx.evaluator.review(ctx.problem_path, candidate, ctx.review_settings, log_dir)
        if built is not None:
            result.stage_seconds["prebuild"] = built.seconds
            result.stage_seconds.update({f"prebuild_{k}": v for k, v in built.stages.items()})
        store.add_review(row.id, result.model_dump(mode="json"))
        if result.ref_ms is not None:
            with self._history_lock:
                self.state.ref_ms.append(result.ref_ms)
        feedback = review_feedback(result)
        return KernelRef(candidate_id=row.id, label=label, path=row.path, source=source,
                         speedup=result.speedup if result.correct else None,
                         ms=result.candidate_ms if result.correct else None,
                         robust_ms=result.timing.candidate.trimmed_mean_ms if result.correct and result.timing else None,
                         feedback=feedback)

    def _decide(self, i: int, round_id: int, base: KernelRef, tag: dict):
        """Features (rules + the Feature Extractor) and, on a GPU, the base's profile → memory.advise."""
        ctx, st, kb = self.ctx, self.state, self.ctx.kb
        assert kb is not None
        key = _sha(base.source)
        if key not in st.llm_features:
            llm_specs = [s for s in kb.code_features if s.mode == "llm"]
            if llm_specs:
                ctx.on_event(Event("phase", f"round {i}: feature extractor reads {base.label}"))
                try:
                    st.llm_features[key] = dict(ctx.team.extract_features(base.source, llm_specs, ctx.task.backend,
                                                                          tag=tag))
                except AgentFailure as exc:  # the llm features stay unknown, with the reason in the trace
                    st.llm_features[key] = {"_error": f"feature extractor reply unusable: {exc.errors[-1:]}"}
        answers = {k: v for k, v in st.llm_features.get(key, {}).items() if not k.startswith("_")}
        judge = LLMFeatureJudge(answers)
        if ctx.profiles and key not in self._evidence:
            ctx.on_event(Event("phase", f"round {i}: profiling {base.label}"))
            kernel = Path(base.path)  # kernels/<task>/<label>.py: its profile is kept in profiles/<task>/<label>/
            keep = ctx.store.run_dir / "profiles" / kernel.parent.name / kernel.stem
            profiled = ctx.evaluator.profile(ctx.problem_path, ctx.store.run_dir / base.path, kb, keep)
            self._evidence[key] = profiled.evidence
            ctx.store.add_profile(base.candidate_id, profiled.evidence.model_dump(mode="json"),
                                  seconds=profiled.stage_seconds.get("profile"),
                                  queue_seconds=profiled.stage_seconds.get("queue"))
        features = extract_features(kb.code_features, build_view(base.source, base.path), judge)
        tried = [TriedMethod(method=a.method, outcome=a.outcome, speedup=a.speedup) for a in st.attempts]
        cached = self._evidence.get(key)
        if cached is None:
            evidence = Evidence(code_path=base.path, code_features=features, tried=tried)
        else:
            evidence = cached.model_copy(update={"code_features": features, "tried": tried})
        if ctx.task.device == "cuda":  # the floor needs a GPU's peaks; the base's measured time sets the distance
            evidence = with_problem(evidence, ctx.problem_path, ctx.task.device_name, base.ms)
        advice = advise(kb, evidence, backend=ctx.task.backend)
        ctx.store.add_decision(round_id, base.candidate_id, advice.model_dump(mode="json"))
        cards = [kb.method(m) for m in advice.allowed_methods]
        return decision_brief(advice), [c for c in cards if c is not None]

    def _record(self, rec: RoundRecord) -> None:
        with self._history_lock:  # seeds finish on several threads
            self.state.history.append(rec)

    def _commit_kernels(self) -> None:
        st = self.state
        self.ctx.store.set_task_kernels(self.ctx.task_id, best=st.best.candidate_id if st.best else None,
                                        base=st.base.candidate_id if st.base else None)


def _plan_text(plan: Plan) -> str:
    return _text(plan.plan)


def _outcome_words(feedback: ReviewFeedback) -> str:
    if feedback.correct:
        return f"correct, {feedback.speedup:.3g}x vs eager" if feedback.speedup is not None else "correct"
    first = (feedback.error or "").strip().splitlines()
    return f"{feedback.error_kind or 'failed'}" + (f": {first[0][:200]}" if first else "")

