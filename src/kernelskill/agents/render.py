"""Prompts are data: Jinja2 templates in `prompts/`, one system and one user template per agent plus shared partials.

This module owns the template environment, the filters the templates use and the section headings. The headings
are constants so tests (and the ablation checks) can assert a section's presence or absence in a rendered prompt.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2

from kernelskill.llm.base import Message

PROMPTS_DIR = Path(__file__).parent / "prompts"

GENERATOR = "generator"
FEATURE_EXTRACTOR = "feature_extractor"
PLANNER = "planner"
OPTIMIZER = "optimizer"
DIAGNOSER = "diagnoser"
REPAIRER = "repairer"
AGENTS = (GENERATOR, FEATURE_EXTRACTOR, PLANNER, OPTIMIZER, DIAGNOSER, REPAIRER)

# The reply-format partial each agent's prompt ends with; the re-ask restates it.
REPLY_FORMATS = {
    GENERATOR: "_format_code.md.j2",
    FEATURE_EXTRACTOR: "_format_features.md.j2",
    PLANNER: "_format_plan.md.j2",
    OPTIMIZER: "_format_code.md.j2",
    DIAGNOSER: "_format_diagnosis.md.j2",
    REPAIRER: "_format_code.md.j2",
}

# Section headings (a line of their own in the user prompt). Distinct prefixes: none is the start of another.
SECTION_TASK = "## Task"
SECTION_REFERENCE = "## Reference program"
SECTION_CONTRACT = "## Candidate contract"
SECTION_APPROACH = "## Your approach"
SECTION_SOURCE = "## Source to classify"
SECTION_FEATURES = "## Features to judge"
SECTION_BASE = "## Base kernel"
SECTION_DECISION = "## Decision policy"
SECTION_METHODS = "## Allowed methods"
SECTION_FREE_CHOICE = "## Free choice of method"
SECTION_OPT_MEMORY = "## Optimization memory"
SECTION_PLAN = "## Plan to implement"
SECTION_METHOD = "## Method card"
SECTION_FAILING = "## Failing kernel"
SECTION_FEEDBACK = "## Review feedback"
SECTION_GOAL = "## Goal of the failing kernel"
SECTION_REPAIR_HISTORY = "## Repair history"
SECTION_DIAGNOSIS = "## Diagnosis"
SECTION_REPLY = "## Reply format"
SECTIONS = {name: value for name, value in globals().items() if name.startswith("SECTION_")}

# Reviewer output is the agents' best feedback: bounded generously, never dropped.
ERROR_CHARS = 6000  # the failing kernel's error message
LOG_CHARS = 4000  # its worker-log tail
HISTORY_CHARS = 1500  # each error of an earlier link of the repair chain


def bounded(text: str | None, limit: int) -> str:
    """`text` cut to about `limit` characters, keeping its head (the first compiler error, the failing line) and
    its longer tail (the final exception, the mismatch summary), with a line saying how much was cut."""
    text = (text or "").rstrip()
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut here; the beginning and the end are kept ...]\n{text[-tail:]}"


def codeblock(text: str | None, lang: str = "") -> str:
    """`text` in a fenced block whose fence is longer than any backtick run inside it."""
    text = (text or "").rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def as_lines(value: object) -> list[str]:
    """A str | list | dict field of a reply as display lines."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [f"{k}: {v}" for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [v if isinstance(v, str) else json.dumps(v) for v in value]
    return [str(value)]


def ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4f} ms" if value < 1 else f"{value:.3f} ms"


def speedup(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


class Prompts:
    """Renders agents' prompts. `directory` (optional) holds templates that override the packaged ones by name."""

    def __init__(self, directory: Path | None = None) -> None:
        loaders: list[jinja2.BaseLoader] = [jinja2.FileSystemLoader(str(PROMPTS_DIR))]
        if directory is not None:
            loaders.insert(0, jinja2.FileSystemLoader(str(directory)))
        self.env = jinja2.Environment(
            loader=jinja2.ChoiceLoader(loaders),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            autoescape=False,
        )
        self.env.filters.update(bounded=bounded, codeblock=codeblock, as_lines=as_lines, ms=ms, speedup=speedup,
                                tojson_compact=lambda v: json.dumps(v))  # fmt: skip
        self.env.globals.update(SECTIONS, ERROR_CHARS=ERROR_CHARS, LOG_CHARS=LOG_CHARS, HISTORY_CHARS=HISTORY_CHARS)

    def render(self, agent: str, **context: object) -> list[Message]:
        """[system, user] messages for `agent`."""
        if agent not in AGENTS:
            raise ValueError(f"unknown agent {agent!r}; expected one of {', '.join(AGENTS)}")
        context = _with_defaults(agent, context)
        return [
            Message(role="system", content=self._render(f"{agent}.system.md.j2", context)),
            Message(role="user", content=self._render(f"{agent}.user.md.j2", context)),
        ]

    def reask(self, agent: str, error: str, **context: object) -> Message:
        """The user message that asks `agent` again after a reply that failed with `error`."""
        context = _with_defaults(agent, context)
        return Message(role="user", content=self._render("reask.user.md.j2", {**context, "error": error}))

    def _render(self, name: str, context: dict) -> str:
        return self.env.get_template(name).render(context).strip() + "\n"


def _with_defaults(agent: str, context: dict) -> dict:
    out = dict(context)
    ctx = out.get("ctx")
    if "task" not in out and ctx is not None and hasattr(ctx, "task"):
        out["task"] = ctx.task
    if "backend" not in out and out.get("task") is not None:
        out["backend"] = out["task"].backend  # type: ignore[union-attr]
    out["agent"] = agent
    out["reply_format"] = REPLY_FORMATS[agent]
    return out
