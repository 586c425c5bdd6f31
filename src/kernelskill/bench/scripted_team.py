"""A scripted "model" for benchmark runs: it answers each chat-completions request from what the request says —
which agent asks (the system prompt names its role) and for which problem (the task section names it) — so the
replies stay right however the concurrent tasks' requests interleave. Used by the bench tests and by
scripts/gpu_bench_check.py (instant replies).

Per task: `seed` is the kernel every Generator call gets, `optimized` what the Optimizer returns, `repaired` what
the Repairer returns. The Planner picks the first method the decision policy allowed (read from its prompt).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.llm.local_server import Reply, openai_ok

_ROLE = re.compile(r"Your role: the (\w+)")
_TASK = re.compile(r"Problem `([^`]+)`")
# the plain list, or the first line of the ranked one ("  1. `method`: expected ~1.5x - why")
_ALLOWED = re.compile(r"Allowed methods, in order of expected payoff: (.*)|Allowed methods, ranked[^\n]*\n\s*1\. (`[a-z_0-9]+`)")


@dataclass
class TaskScript:
    seed: str
    optimized: str | None = None
    repaired: str | None = None


@dataclass
class ScriptedTeam:
    tasks: dict[str, TaskScript]
    hang: set[str] = field(default_factory=set)  # tasks whose Planner answers only after `hang_s` (to kill a run)
    hang_s: float = 120.0
    calls: list[tuple[str, str]] = field(default_factory=list)  # (agent, task) per request
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict) -> Reply:
        messages = body.get("messages") or []
        system = messages[0]["content"] if messages else ""
        user = messages[-1]["content"] if messages else ""
        role = _ROLE.search(system)
        agent = role.group(1).lower() if role else ("feature_extractor" if "careful reviewer" in system else "?")
        task_m = _TASK.search(user) or _TASK.search(" ".join(m["content"] for m in messages))
        task = task_m.group(1) if task_m else "?"
        with self._lock:
            self.calls.append((agent, task))
        if agent == "feature_extractor":
            answers = {"uncoalesced_pattern": False, "divergent_branches": False, "redundant_work": False}
            return ok(f"```json\n{json.dumps({'features': answers})}\n```")
        script = self.tasks.get(task)
        if script is None:
            return ok(f"no script for task {task!r}")  # unusable: the round fails, as a confused model's would
        if agent == "generator":
            return ok(code(script.seed))
        if agent == "planner":
            if task in self.hang:
                time.sleep(self.hang_s)
            allowed = _ALLOWED.search(user)
            ids = re.findall(r"`([a-z_0-9]+)`", allowed.group(1) or allowed.group(2)) if allowed else []
            method = ids[0] if ids else "launch_config_tuning"
            plan = {"bottleneck": "scripted", "method": method, "plan": ["keep the kernel", "retune nothing"],
                    "evidence": "scripted reply", "expected_metric_change": "none",
                    "what_differs": "a scripted repeat"}
            return ok(f"```json\n{json.dumps(plan)}\n```")
        if agent == "optimizer":
            return ok(code(script.optimized or script.seed))
        if agent == "diagnoser":
            diag = {"critical_issue": "the kernel fails", "root_cause": "scripted", "evidence": "the review",
                    "fix": "use the repaired kernel"}
            return ok(f"```json\n{json.dumps(diag)}\n```")
        if agent == "repairer":
            return ok(code(script.repaired or script.seed))
        return ok(f"unknown agent {agent!r}")


def ok(text: str) -> Reply:
    return openai_ok(text, prompt_tokens=100, completion_tokens=50)


def code(source: str) -> str:
    return f"Here is the kernel.\n\n```python\n{source}```\n"


def read(path: Path) -> str:
    return Path(path).read_text()
