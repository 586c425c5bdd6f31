"""The six agents behind one small class: render the agent's prompt, call the model, parse and check the reply, and
re-ask once with the error when the reply cannot be used.

Every request and response is reported to `on_call` (the loop stores them in the run store). A reply that is still
unusable after the re-ask raises `AgentFailure`, which the loop records as a failed round; errors of the LLM layer
(`LLMError`, `BudgetExceeded`) are not reply problems and propagate untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kernelskill.agents.context import (
    Diagnosis,
    OptimizeContext,
    Plan,
    PlanContext,
    RepairContext,
    TaskBrief,
)
from kernelskill.agents.render import (
    DIAGNOSER,
    FEATURE_EXTRACTOR,
    GENERATOR,
    OPTIMIZER,
    PLANNER,
    REPAIRER,
    Prompts,
)
from kernelskill.agents.replies import (
    ReplyError,
    extract_code,
    parse_diagnosis,
    parse_features,
    parse_plan,
)
from kernelskill.llm.base import Completion, LLMClient, Message
from kernelskill.memory.knowledge.schema import CodeFeatureSpec

T = TypeVar("T")


@dataclass(frozen=True)
class LLMCallEvent:
    """One request and its response (or the error it raised), for the run store."""

    agent: str  # generator | feature_extractor | planner | optimizer | diagnoser | repairer
    attempt: int  # 1, or 2 for the re-ask
    messages: list[Message]
    completion: Completion | None  # None when the call raised
    error: str | None  # "Type: message" when the call raised, else None
    tag: dict = field(default_factory=dict)  # what the caller passed as tag= (the loop: {"round": i, "slot": k})


class AgentFailure(Exception):
    """An agent's reply could not be used, even after the re-ask. Both errors and both replies are kept."""

    def __init__(self, agent: str, errors: list[str], replies: list[str]) -> None:
        self.agent = agent
        self.errors = list(errors)
        self.replies = list(replies)
        super().__init__(
            f"the {agent} gave no usable reply in {len(self.errors)} attempt(s); last error: {self.errors[-1]}"
        )


class Team:
    """Generator, Feature Extractor, Planner, Optimizer, Diagnoser and Repairer over one LLM client."""

    def __init__(
        self,
        client: LLMClient,
        *,
        on_call: Callable[[LLMCallEvent], None] | None = None,
        max_tokens: int = 8192,
        temperature: float | None = None,
        prompts_dir: Path | None = None,
    ) -> None:
        self.client = client
        self.on_call = on_call
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.prompts = Prompts(prompts_dir)

    def render(self, agent: str, **context: object) -> list[Message]:
        """The [system, user] messages `agent` is sent for `context` (the keyword arguments its templates read:
        task/seed/seeds, source/features/backend, ctx, diagnosis)."""
        return self.prompts.render(agent, **context)

    # the agents ---------------------------------------------------------------------------------------------------

    def generate(self, task: TaskBrief, *, seed: int, seeds: int, tag: dict | None = None) -> str:
        """Candidate source for seed `seed` (1-based) of `seeds`; each seed is asked for a different approach."""
        if not 1 <= seed <= seeds:
            raise ValueError(f"seed must be in 1..{seeds}, got {seed}")
        return self._ask(GENERATOR, {"task": task, "seed": seed, "seeds": seeds}, extract_code, tag)

    def extract_features(
        self, source: str, specs: list[CodeFeatureSpec], backend: str, *, tag: dict | None = None
    ) -> dict[str, object]:
        """Raw answers for the llm-mode features among `specs`, asked in one call ({} without a call when there are
        none). Unknown names are dropped; values are not checked here (the memory layer validates them)."""
        asked = [s for s in specs if s.mode == "llm"]
        if not asked:
            return {}
        names = [s.id for s in asked]
        context = {"source": source, "features": asked, "backend": backend}
        return self._ask(FEATURE_EXTRACTOR, context, lambda text: parse_features(text, names), tag)

    def plan(self, ctx: PlanContext, *, tag: dict | None = None) -> Plan:
        return self._ask(PLANNER, {"ctx": ctx}, lambda text: parse_plan(text, ctx), tag)

    def optimize(self, ctx: OptimizeContext, *, tag: dict | None = None) -> str:
        return self._ask(OPTIMIZER, {"ctx": ctx}, extract_code, tag)

    def diagnose(self, ctx: RepairContext, *, tag: dict | None = None) -> Diagnosis:
        return self._ask(DIAGNOSER, {"ctx": ctx}, parse_diagnosis, tag)

    def repair(self, ctx: RepairContext, diagnosis: Diagnosis, *, tag: dict | None = None) -> str:
        return self._ask(REPAIRER, {"ctx": ctx, "diagnosis": diagnosis}, extract_code, tag)

    # plumbing -----------------------------------------------------------------------------------------------------

    def _ask(self, agent: str, context: dict, parse: Callable[[str], T], tag: dict | None) -> T:
        tag = dict(tag or {})
        messages = self.render(agent, **context)
        errors: list[str] = []
        replies: list[str] = []
        for attempt in (1, 2):
            completion = self._call(agent, attempt, messages, tag)
            try:
                return parse(completion.text)
            except ReplyError as exc:
                errors.append(str(exc))
                replies.append(completion.text)
            messages = [
                *messages,
                Message(role="assistant", content=completion.text),
                self.prompts.reask(agent, errors[-1], **context),
            ]
        raise AgentFailure(agent, errors, replies)

    def _call(self, agent: str, attempt: int, messages: list[Message], tag: dict) -> Completion:
        try:
            completion = self.client.complete(
                list(messages), max_tokens=self.max_tokens, temperature=self.temperature, agent=agent
            )
        except Exception as exc:
            self._report(LLMCallEvent(agent, attempt, list(messages), None, f"{type(exc).__name__}: {exc}", tag))
            raise
        self._report(LLMCallEvent(agent, attempt, list(messages), completion, None, tag))
        return completion

    def _report(self, event: LLMCallEvent) -> None:
        if self.on_call is not None:
            self.on_call(event)


class NoAnswer(KeyError):
    """No usable answer for a feature (a KeyError whose message prints without quotes)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "no answer"


class LLMFeatureJudge:
    """A `kernelskill.memory.features.FeatureJudge` over answers already obtained with `Team.extract_features`.

    A feature without an answer raises KeyError, which the memory layer reports as that feature unknown, with the
    reason. The judge serves the answers whatever `source` it is handed: the memory layer passes its own view of the
    code (comments removed), not the text the answers were obtained for."""

    def __init__(self, answers: Mapping[str, object]) -> None:
        self.answers = dict(answers)

    def judge_feature(self, feature: CodeFeatureSpec, source: str) -> object:
        if feature.id not in self.answers:
            raise NoAnswer(f"the Feature Extractor gave no answer for `{feature.id}`")
        return self.answers[feature.id]
