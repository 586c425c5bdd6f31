"""Long-term memory: expert optimization knowledge as validated YAML, and the traceable policy that applies it.

    kb = load_knowledge()                                   # knowledge/*.yaml, checked
    evidence = collect_evidence(kb, metrics=csv, code=src)  # ncu raw CSV, code features, profiler summary
    decision = decide(kb, evidence)                         # bottleneck, case, allowed methods + full trace

Floors, lowest first (a module imports only from its own floor or below; tests/test_layering.py holds it):

    knowledge/  the YAML a curator edits, its schema (schema.py), the safe expressions (expr.py), the loader
    features/   code features: the source view (codeview.py) and the rule families (rules.py)
    policy/     evidence (evidence.py, collect.py), the decision (decide.py, ranking.py, trace.py)
    tools/      `kernelskill memory ...` (cli.py), the decision benchmark (bench.py), learn.py, render.py

Measuring is not done here: kernelskill.profiling runs ncu and the PyTorch profiler.
"""

from kernelskill.memory.features.extract import FeatureJudge, FeatureValue, extract_features
from kernelskill.memory.knowledge import KnowledgeBase, check_coverage
from kernelskill.memory.policy.collect import collect_evidence, profile_candidate
from kernelskill.memory.policy.decide import decide
from kernelskill.memory.policy.evidence import Evidence
from kernelskill.memory.policy.load import load_knowledge
from kernelskill.memory.policy.trace import Decision

__all__ = [
    "Decision", "Evidence", "FeatureJudge", "FeatureValue", "KnowledgeBase", "check_coverage", "collect_evidence",
    "decide", "extract_features", "load_knowledge", "profile_candidate",
]  # fmt: skip
