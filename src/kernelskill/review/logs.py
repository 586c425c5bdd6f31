"""Trimming compiler, verifier and worker logs to the lines that matter, for humans and LLM prompts.

Nothing is thrown away: the full text stays in the log file; the trimmed text keeps every error line with a little
context, and the tail.
"""

from __future__ import annotations

import re

_INTERESTING = re.compile(r"(error|Error|ERROR|warning|Traceback|Exception|assert|undefined|illegal|Aborted|\^)")


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
