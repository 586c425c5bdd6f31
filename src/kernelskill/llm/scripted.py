"""Clients that need no model: `replay:PATH` serves recorded replies in order; `fake:` is a scripted client for tests.

A transcript is JSON Lines (one entry a line) or one JSON document (a list of entries, or an object whose `entries`
key holds the list). An entry is {"reply": str, "agent"?: str, "messages"?: [...], "usage"?: {...}}; other keys (a
"note" saying the replies were written by hand, the round it was recorded in …) are kept for readers and ignored here.

When entries name their agent, each agent is served its own replies in order, so a replayed run does not depend on
how calls of different agents interleaved (seeds are generated concurrently). Entries without an agent are served
in file order to whoever asks.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelskill.errors import KernelSkillError
from kernelskill.llm.base import Completion, LLMError, Message, Usage


class TranscriptEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    reply: str
    agent: str | None = None
    messages: list[Message] | None = None
    usage: Usage | None = None


class ReplayExhausted(LLMError):
    """The run asked for more replies than the transcript holds."""


class ReplayMismatch(LLMError):
    """In strict mode, a request differs from the messages recorded for it."""


def load_transcript(path: Path) -> list[TranscriptEntry]:
    """Read a transcript file, with errors that name the file and the entry at fault."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KernelSkillError(f"cannot read replay transcript {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):  # {"entries": [...]}, or a one-line JSON Lines file holding a single entry
            raw = doc["entries"] if "entries" in doc or "reply" not in doc else [doc]
        else:
            raw = doc
        if not isinstance(raw, list):
            raise KernelSkillError(
                f"replay transcript {path}: expected a list of entries or an object with an 'entries' list"
            )
        items = [(f"entry {i + 1}", item) for i, item in enumerate(raw)]
    except json.JSONDecodeError:
        items = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append((f"line {lineno}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise KernelSkillError(
                    f"replay transcript {path}, line {lineno}: not valid JSON ({exc.msg}); expected JSON Lines "
                    'of {"reply": ...} or one JSON list'
                ) from None
    entries = []
    for where, item in items:
        try:
            entries.append(TranscriptEntry.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "entry"
            raise KernelSkillError(f"replay transcript {path}, {where}: {loc}: {first['msg']}") from None
    if not entries:
        raise KernelSkillError(f"replay transcript {path} holds no entries")
    return entries


class ReplayClient:
    """Serves a transcript's replies in order. Cost is None: nothing was bought."""

    priced = False

    def __init__(self, path: str | Path, *, strict: bool = False) -> None:
        self.path = Path(path)
        self.model = f"replay:{self.path}"
        self.entries = load_transcript(self.path)
        self.strict = strict  # also require each request to equal the messages recorded for it
        self._served: set[int] = set()
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        return len(self.entries) - len(self._served)

    def _take(self, agent: str | None) -> tuple[int, TranscriptEntry] | None:
        """The next unserved entry for `agent`: the first one recorded for that agent, else the first untagged."""
        unserved = [i for i in range(len(self.entries)) if i not in self._served]
        for i in unserved:
            if agent is not None and self.entries[i].agent == agent:
                return i, self.entries[i]
        for i in unserved:
            if self.entries[i].agent is None or agent is None:
                return i, self.entries[i]
        return None

    def skip(self, agent: str | None, count: int) -> None:
        """Mark the next `count` replies for `agent` as served: a resumed run already used them before it stopped."""
        with self._lock:
            for _ in range(count):
                found = self._take(agent)
                if found is None:
                    raise ReplayExhausted(
                        f"replay transcript {self.path} holds fewer replies for the {agent} than the interrupted "
                        "run already used: resume it with the model it was started with"
                    )
                self._served.add(found[0])

    def complete(
        self, messages: list[Message], *, max_tokens: int = 4096, temperature: float | None = None,
        agent: str | None = None,
    ) -> Completion:
        start = time.monotonic()
        with self._lock:
            found = self._take(agent)
            if found is None:
                who = f" for the {agent}" if agent else ""
                raise ReplayExhausted(
                    f"replay transcript {self.path} holds no more replies{who} ({len(self._served)} of "
                    f"{len(self.entries)} served): the run made more LLM calls than were recorded "
                    "(other settings, or a different problem?)"
                )
            index, entry = found
            self._served.add(index)
        if self.strict and entry.messages is not None and entry.messages != list(messages):
            raise ReplayMismatch(
                f"replay transcript {self.path}, entry {index + 1}: the request differs from the recorded messages "
                f"({_first_difference(entry.messages, list(messages))})"
            )
        usage = entry.usage or Usage.estimate(messages, entry.reply)
        return Completion(
            text=entry.reply, usage=usage, model=self.model, latency_s=time.monotonic() - start, cost_usd=None,
        )

    def check_consumed(self) -> None:
        """Raise if the run ended with replies left over (it made fewer calls than were recorded)."""
        if self.remaining:
            raise ReplayMismatch(
                f"replay transcript {self.path} holds {len(self.entries)} replies but the run used only "
                f"{len(self._served)}: the run made fewer LLM calls than were recorded"
            )

    def __repr__(self) -> str:
        return f"ReplayClient(path={str(self.path)!r}, served={len(self._served)}/{len(self.entries)})"


def _first_difference(recorded: list[Message], sent: list[Message]) -> str:
    if len(recorded) != len(sent):
        return f"{len(recorded)} messages recorded, {len(sent)} sent"
    for i, (a, b) in enumerate(zip(recorded, sent)):
        if a != b:
            return f"message {i + 1} ({a.role}) differs: recorded {a.content[:80]!r}, sent {b.content[:80]!r}"
    return "no difference"


class FakeClient:
    """A deterministic client for tests. With `replies`, serves them in order (an exception in the list is raised
    instead); without, answers every call with a reply derived from the last message. Every request is kept in
    `calls` so a test can inspect the prompts."""

    priced = False

    def __init__(self, replies: Sequence[str | BaseException] | None = None, *, model: str = "fake:") -> None:
        self.model = model
        self.replies = list(replies) if replies is not None else None
        self.calls: list[list[Message]] = []
        self._lock = threading.Lock()

    def complete(
        self, messages: list[Message], *, max_tokens: int = 4096, temperature: float | None = None,
        agent: str | None = None,
    ) -> Completion:
        with self._lock:
            self.calls.append(list(messages))
            n = len(self.calls)
        if self.replies is None:
            last = messages[-1].content if messages else ""
            reply: str | BaseException = f"fake reply {n} to: {last[:200]}"
        elif n > len(self.replies):
            raise LLMError(f"fake client scripted with {len(self.replies)} replies was asked for reply {n}")
        else:
            reply = self.replies[n - 1]
        if isinstance(reply, BaseException):
            raise reply
        return Completion(
            text=reply, usage=Usage.estimate(messages, reply), model=self.model, latency_s=0.0, cost_usd=None
        )

    def __repr__(self) -> str:
        scripted = "echo" if self.replies is None else f"{len(self.replies)} replies"
        return f"FakeClient({scripted}, calls={len(self.calls)})"
