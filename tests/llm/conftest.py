from __future__ import annotations

import pytest

from kernelskill.llm import Message, RetryPolicy

KEY = "sk-test-7f3a9c1e5b2d4680-very-secret"
ANTHROPIC_KEY = "sk-ant-test-0c8e2a4f6b1d3957-very-secret"


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def policy() -> RetryPolicy:
    return RetryPolicy(max_attempts=4, base_delay_s=1.0, max_delay_s=30.0)


def ask(text: str = "Write a kernel.") -> list[Message]:
    return [Message(role="system", content="You write GPU kernels."), Message(role="user", content=text)]
