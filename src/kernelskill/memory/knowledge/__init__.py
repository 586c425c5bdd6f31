"""The knowledge base: the YAML files in this folder, their schema and the safe expressions they are written in.

A curator edits the YAML; schema.py says what each section may hold, expr.py what an expression may say, and
loader.py checks both (and every cross-reference) when the files are read. Nothing here imports code above it: the
extractors a knowledge base is checked against are handed in (`Extractors`).
"""

from kernelskill.memory.knowledge.loader import (
    TIER_NAME, Extractors, KnowledgeBase, check_coverage, default_knowledge_dir, read_knowledge,
)  # fmt: skip

__all__ = ["TIER_NAME", "Extractors", "KnowledgeBase", "check_coverage", "default_knowledge_dir", "read_knowledge"]
