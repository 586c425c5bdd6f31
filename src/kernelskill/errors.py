"""Errors a user can fix, and the exit codes the command line returns.

A `KernelSkillError` carries a message that is safe and helpful to print as is: it names the file or setting at
fault and says what to do. Anything else that escapes is a bug and is shown with its traceback.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of the `kernelskill` command (documented in the README)."""

    OK = 0  # the candidate is correct / the command did what was asked
    INCORRECT = 1  # the candidate ran but its output is wrong (or it raised while running)
    BAD_INPUT = 2  # a malformed problem or candidate file, a bad option, a broken knowledge base
    COMPILE_FAILED = 3  # the candidate did not build or import
    TIMEOUT = 4  # a stage ran past its time limit
    REJECTED = 5  # an anti-reward-hacking check rejected the candidate
    CRASHED = 6  # the worker process died (segfault, abort, illegal memory access)
    NO_MODEL = 7  # no LLM is configured
    INTERNAL = 70  # a bug in KernelSkill


class KernelSkillError(Exception):
    """An error the user can fix. The message is printed without a traceback."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ProblemError(KernelSkillError):
    """A problem file is not a valid KernelBench problem."""


class CandidateError(KernelSkillError):
    """A candidate file cannot be read or has no ModelNew."""


class SandboxError(KernelSkillError):
    """A sandbox layer the settings ask for cannot be put in place here: nothing runs unconfined. The message says
    what to do and how to turn the layer off explicitly."""

    exit_code = ExitCode.BAD_INPUT


class KnowledgeBaseError(KernelSkillError):
    """The long-term memory (YAML knowledge base) is invalid."""
