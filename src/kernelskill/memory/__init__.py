"""Long-term memory: expert optimization knowledge as validated YAML, and the traceable policy that applies it.

    kb = load_knowledge()                                   # knowledge/*.yaml, checked
    evidence = collect_evidence(kb, metrics=csv, code=src)  # ncu raw CSV, code features, profiler summary
    advice = advise(kb, evidence, backend="triton")         # bottleneck, case, ranked methods + the full trace

advise() is the one way from evidence to advice: the loop's Planner, `kernelskill memory explain`, the decision
benchmark (`memory bench`) and `memory learn` all read what it returns.

Floors, lowest first (a module imports only from its own floor or below; tests/test_layering.py holds it):

    knowledge/  the YAML a curator edits (README.md: where a rule lives, what it reads, which test proves it),
                schema.py, expr.py (the safe expressions), loader.py (read and cross-check)
    features/   code features: codeview.py (the source, split), rules.py (RULES, per backend) drawing on the
                families cuda.py, triton.py, host.py, serial.py; extract.py (rules and the LLM judge)
    policy/     evidence.py (and its run features), collect.py (gathering it), decide.py (the table),
                ranking.py (expected gains), trace.py (Decision, Advice), advise.py, load.py
    tools/      cli.py (`kernelskill memory ...`), bench.py (the decision benchmark), learn.py, render.py

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
