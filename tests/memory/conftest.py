"""Fixtures for the long-term-memory tests (helpers live in memhelpers.py)."""

from __future__ import annotations

import pytest

from kernelskill.memory import KnowledgeBase, load_knowledge


@pytest.fixture(scope="session")
def kb() -> KnowledgeBase:
    return load_knowledge()
