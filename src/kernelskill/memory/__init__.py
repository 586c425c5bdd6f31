"""Long-term memory: expert optimization knowledge as validated YAML, and the traceable policy that applies it.

    kb = load_knowledge()                                   # knowledge/*.yaml, checked
    evidence = collect_evidence(kb, metrics=csv, code=src)  # ncu raw CSV, code features, profiler summary
    advice = advise(kb, evidence, backend="triton")         # bottleneck, case, ranked methods + the full trace

advise() is the one way from evidence to advice: the loop's Planner, `kernelskill memory explain`, the decision
benchmark (`memory bench`) and `memory learn` all read what it returns.

Floors, lowest first (a module imports only from its own floor or below; tests/test_layering.py holds it):

    knowledge/  the YAML a curator edits, its schema (schema.py), the safe expressions (expr.py), the loader
    features/   code features: the source view (codeview.py) and the rule families (rules.py)
    policy/     evidence (evidence.py, collect.py), the decision (decide.py, ranking.py, trace.py)
    tools/      `kernelskill memory ...` (cli.py), the decision benchmark (bench.py), learn.py, render.py

Measuring is not done here: kernelskill.profiling runs ncu and the PyTorch profiler.
"""

from kernelskill.memory.features.extract import FeatureJudge, FeatureValue, extract_features
from kernelskill.memory.knowledge import KnowledgeBase, check_coverage
from kernelskill.memory.policy.advise import advise
from kernelskill.memory.policy.collect import collect_evidence, profile_candidate, with_problem
from kernelskill.memory.policy.decide import decide
from kernelskill.memory.policy.evidence import Evidence, TriedMethod
from kernelskill.memory.policy.load import load_knowledge
from kernelskill.memory.policy.trace import Advice, Decision

__all__ = [
    "Advice", "Decision", "Evidence", "FeatureJudge", "FeatureValue", "KnowledgeBase", "TriedMethod", "advise",
    "check_coverage", "collect_evidence", "decide", "extract_features", "load_knowledge", "profile_candidate",
    "with_problem",
]  # fmt: skip
