"""Long-term memory: expert optimization knowledge as validated YAML, and the traceable policy that applies it.

    kb = load_knowledge()                                   # knowledge/*.yaml, checked
    evidence = collect_evidence(kb, metrics=csv, code=src)  # ncu raw CSV, code features, profiler summary
    decision = decide(kb, evidence)                         # bottleneck, case, allowed methods + full trace

Modules: expr (safe expressions), schema/knowledge (the knowledge base), ncu (raw CSV), codeview/code_rules/features
(code features), evidence/collect (inputs), policy/decision (the decision and its trace), render, cli.
"""

from kernelskill.memory.collect import collect_evidence, profile_candidate
from kernelskill.memory.decision import Decision
from kernelskill.memory.evidence import Evidence, FeatureValue, ProfilerSummary
from kernelskill.memory.features import FeatureJudge, extract_features
from kernelskill.memory.knowledge import KnowledgeBase, check_coverage, load_knowledge
from kernelskill.memory.ncu import NcuReport, load_ncu_csv, parse_ncu_csv
from kernelskill.memory.policy import decide

__all__ = [
    "Decision", "Evidence", "FeatureJudge", "FeatureValue", "KnowledgeBase", "NcuReport", "ProfilerSummary",
    "check_coverage", "collect_evidence", "decide", "extract_features", "load_knowledge", "load_ncu_csv",
    "parse_ncu_csv", "profile_candidate",
]  # fmt: skip
