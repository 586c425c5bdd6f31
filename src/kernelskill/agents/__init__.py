"""The agents: Generator, Feature Extractor (LLM part), Planner, Optimizer, Diagnoser and Repairer.

    team = Team(client, on_call=store.record)
    source = team.generate(task, seed=1, seeds=3)
    plan = team.plan(PlanContext(...))          # validated against the allowed methods and the attempts so far
    source = team.optimize(OptimizeContext(...))

Modules: context (what the loop hands the agents), render + prompts/ (the prompt templates), replies (reading and
checking the models' replies), team (the calls, the re-ask, the events).
"""

from kernelskill.agents.context import (
    Attempt,
    DecisionBrief,
    Diagnosis,
    OptimizeContext,
    Plan,
    PlanContext,
    RepairContext,
    RepairStep,
    ReviewFeedback,
    TaskBrief,
)
from kernelskill.agents.render import AGENTS, SECTIONS, Prompts
from kernelskill.agents.replies import ReplyError, extract_code, extract_json
from kernelskill.agents.team import AgentFailure, LLMCallEvent, LLMFeatureJudge, Team

__all__ = [
    "AGENTS",
    "SECTIONS",
    "AgentFailure",
    "Attempt",
    "DecisionBrief",
    "Diagnosis",
    "LLMCallEvent",
    "LLMFeatureJudge",
    "OptimizeContext",
    "Plan",
    "PlanContext",
    "Prompts",
    "RepairContext",
    "RepairStep",
    "ReplyError",
    "ReviewFeedback",
    "TaskBrief",
    "Team",
    "extract_code",
    "extract_json",
]  # fmt: skip
