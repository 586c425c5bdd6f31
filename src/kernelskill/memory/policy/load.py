"""The knowledge base as the policy reads it: the YAML of knowledge/, checked against the extractors this package
has (the rule-mode code features of features/rules.py, the run features of policy/evidence.py)."""

from __future__ import annotations

from pathlib import Path

from kernelskill.memory.features.rules import RULES
from kernelskill.memory.knowledge import Extractors, KnowledgeBase, read_knowledge
from kernelskill.memory.policy.evidence import RUN_FEATURES


def extractors() -> Extractors:
    return Extractors(code_rules=frozenset(RULES),
                      run_features={fid: frozenset(sources) for fid, sources in RUN_FEATURES.items()})  # fmt: skip


def load_knowledge(directory: str | Path | None = None) -> KnowledgeBase:
    """Load and check the knowledge base in `directory` (default: the one shipped in the package)."""
    return read_knowledge(directory, extractors())
