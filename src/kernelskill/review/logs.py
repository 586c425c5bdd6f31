"""Capping a worker's log as it arrives (LogSink), and trimming compiler, verifier and worker logs to the lines that
matter, for humans and LLM prompts.

Nothing is thrown away: the full text stays in the log file; the trimmed text keeps every error line with a little
context, and the tail.
"""

from __future__ import annotations

import re
from pathlib import Path

_INTERESTING = re.compile(r"(error|Error|ERROR|warning|Traceback|Exception|assert|undefined|illegal|Aborted|\^)")

LOG_HEAD, LOG_TAIL = 16 << 20, 1 << 20  # a review's log: its first 16 MiB, then only its last 1 MiB


class LogSink:
    """A review's log, written by this process from the worker's output as it arrives: the first LOG_HEAD bytes,
    then only the last LOG_TAIL (the end of a flood is where its traceback is), with a line saying what was left
    out. A candidate that prints gigabytes costs neither memory nor disk."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.pending = b""  # output that arrived before there was a log to write it to
        self.written = self.dropped = 0
        self.tail = bytearray()
        self.file = open(path, "ab") if path else None

    def switch(self, path: Path) -> None:
        if path == self.path and self.file is not None:
            return
        self.close()
        self.path, self.file = path, open(path, "ab")
        self.written = self.dropped = 0
        if self.pending:
            pending, self.pending = self.pending, b""
            self.write(pending)

    def write(self, chunk: bytes) -> None:
        room = max(LOG_HEAD - self.written, 0)
        if room and self.file is not None:
            self.file.write(chunk[:room])
            self.file.flush()
            self.written += min(room, len(chunk))
        rest = chunk[room:]
        if rest:
            self.dropped += len(rest)
            self.tail += rest
            del self.tail[:-LOG_TAIL]

    def close(self) -> None:
        if self.file is None:
            return
        if self.dropped:
            left_out = self.dropped - len(self.tail)
            self.file.write(f"\n[kernelskill] the log was capped at {LOG_HEAD >> 20} MiB: {left_out} bytes left out "
                            f"here; its last {len(self.tail)} bytes follow\n".encode() + bytes(self.tail))
        self.file.close()
        self.file = None
        self.tail = bytearray()



def trim_log(text: str, max_lines: int = 60, tail: int = 20, context: int = 2) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) <= max_lines:
        return "\n".join(lines)
    keep: set[int] = set(range(max(0, len(lines) - tail), len(lines)))
    for i, line in enumerate(lines):
        if _INTERESTING.search(line):
            keep.update(range(max(0, i - context), min(len(lines), i + context + 1)))
    chosen = sorted(keep)
    if len(chosen) > max_lines:  # too many interesting lines: the first errors and the tail matter most
        head = [i for i in chosen if i < len(lines) - tail][: max_lines - tail]
        chosen = sorted(set(head) | set(range(len(lines) - tail, len(lines))))
    out, last = [], -1
    for i in chosen:
        if i != last + 1:
            out.append(f"[... {i - last - 1} lines omitted ...]")
        out.append(lines[i])
        last = i
    return "\n".join(out)


def filter_header_warnings(text: str, own_files: tuple[str, ...]) -> list[str]:
    """Warnings from the candidate's own sources, not from PyTorch's headers."""
    return [line for line in text.splitlines() if "warning" in line and any(f in line for f in own_files)]


_ERROR_LINE = re.compile(r"(\berror\b|\berror:|undefined reference)", re.IGNORECASE)


def compiler_errors(text: str, limit: int = 20) -> str:
    """The compiler's error lines, each with the source line and caret that follow it, without command lines."""
    lines = text.splitlines()
    picked: list[str] = []
    for i, line in enumerate(lines):
        command_line = " -o " in line and (" -c " in line or "-MD" in line)
        if not _ERROR_LINE.search(line) or len(line) > 400 or command_line or line.lstrip().startswith(("[", "FAILED")):
            continue
        if "Error building extension" in line:
            continue
        picked.extend(lines[i : i + 3] if i + 2 < len(lines) and "^" in lines[i + 2] else lines[i : i + 1])
        if len(picked) >= limit:
            break
    return "\n".join(picked) if picked else trim_log(text, max_lines=limit)
