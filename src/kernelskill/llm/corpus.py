"""`corpus:DIR`: published kernels served as the Generator's replies, so `bench` and `optimize` review them.

A corpus folder is what `kernelskill corpus import` writes from a public set of kernels (CUDA-L1's released JSON, a
folder of KernelBench-style solutions):

    DIR/corpus.json                      index: where it came from, and one entry per task
    DIR/problems/level<L>/<name>.py      the reference each kernel was written against, when the source has it
    DIR/kernels/level<L>/<name>.py       the published kernel, unchanged

`kernelskill bench --problems DIR/problems --model corpus:DIR --seeds 1 --rounds 0` then reviews every published
kernel against its own reference. The client finds a request's task by the reference program in the prompt (exact,
whitespace-normalized), else by the task's name; a task the corpus has no kernel for ends with that reason. Only
the Generator is served: a corpus has nothing to say in optimization or repair rounds.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from kernelskill.errors import KernelSkillError
from kernelskill.folders import write_atomically
from kernelskill.llm.base import Completion, LLMError, Message, Usage

INDEX = "corpus.json"
FORMAT = 1


class CorpusEntry(BaseModel):
    level: str
    index: int | None = None
    name: str  # file stem, e.g. "19_ReLU"
    problem: str | None = None  # relative to the corpus folder
    kernel: str | None = None  # None: the source publishes no kernel for this task
    problem_sha: str | None = None  # of the normalized reference source
    reason: str | None = None  # why there is no kernel, in words
    meta: dict = Field(default_factory=dict)  # the source's own figures (its speedups), kept for comparison


class CorpusIndex(BaseModel):
    format: int = FORMAT
    source: str  # where the kernels came from (a path, a repository and commit ...)
    entries: list[CorpusEntry]


class CorpusMiss(LLMError):
    """The corpus holds no kernel for the task asked about (or it was asked for something other than a seed)."""


def normalize(source: str) -> str:
    """Trailing whitespace and blank edges do not make a different program."""
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def source_sha(source: str) -> str:
    return hashlib.sha256(normalize(source).encode()).hexdigest()


def read_index(root: Path) -> CorpusIndex:
    path = Path(root) / INDEX
    try:
        return CorpusIndex.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KernelSkillError(f"corpus:{root}: cannot read {path} ({exc.strerror or exc}); make one with "
                               "`kernelskill corpus import SOURCE --out DIR`") from None
    except ValidationError as exc:
        raise KernelSkillError(f"corpus:{root}: {path} is not a corpus index: {exc.errors()[0]['msg']}") from None


def write_index(root: Path, index: CorpusIndex) -> None:
    write_atomically(Path(root) / INDEX, json.dumps(index.model_dump(mode="json"), indent=1))


_TASK_NAME = re.compile(r"Problem `([^`]+)`")


class CorpusClient:
    """Serves each task's published kernel as the Generator's reply (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.model = f"corpus:{root}"
        self.index = read_index(self.root)
        self._lock = threading.Lock()
        self._problems: list[tuple[str, CorpusEntry]] = []
        for entry in self.index.entries:
            if entry.problem:
                text = (self.root / entry.problem).read_text(encoding="utf-8", errors="replace")
                self._problems.append((normalize(text), entry))

    def find(self, prompt: str) -> CorpusEntry:
        """The entry whose reference program the prompt holds, else the one named in it."""
        text = normalize(prompt)
        by_source = [e for src, e in self._problems if src and src in text]
        if by_source:
            return max(by_source, key=lambda e: len(e.name))  # the longest program wins over one it contains
        m = _TASK_NAME.search(prompt)
        if m:
            name = m.group(1)
            level = None
            if re.match(r"L[^/]+/", name):
                level, name = name[1:].split("/", 1)
            named = [e for e in self.index.entries if e.name == name and (level is None or e.level == level)]
            if len(named) == 1:
                return named[0]
            if len(named) > 1:
                raise CorpusMiss(f"corpus:{self.root} has {len(named)} tasks named {name!r} (levels "
                                 f"{', '.join(e.level for e in named)}) and the reference matches none of them")
            raise CorpusMiss(f"corpus:{self.root} has no task named {name!r} and no reference program like this "
                             "task's")
        raise CorpusMiss(f"corpus:{self.root}: the request names no task and holds no reference program it knows")

    def complete(self, messages: list[Message], *, max_tokens: int = 4096, temperature: float | None = None,
                 agent: str | None = None) -> Completion:
        if agent not in (None, "generator"):
            raise CorpusMiss(f"corpus:{self.root} serves published kernels as seeds only, not the {agent}; run "
                             "with --rounds 0")
        prompt = "\n".join(m.content for m in messages if m.role == "user")
        entry = self.find(prompt)
        if entry.kernel is None:
            raise CorpusMiss(f"corpus:{self.root} has no kernel for {entry.name} (level {entry.level}): "
                             f"{entry.reason or 'the source publishes none'}")
        source = (self.root / entry.kernel).read_text(encoding="utf-8", errors="replace").rstrip("\n")
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`{3,}", source)), default=0))
        reply = (f"The published kernel for {entry.name} (level {entry.level}), from {self.index.source}.\n\n"
                 f"{fence}python\n{source}\n{fence}\n")
        return Completion(text=reply, usage=Usage(), model=self.model, latency_s=0.0, cost_usd=0.0)
