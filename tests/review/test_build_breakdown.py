"""scripts/build_breakdown.py without compiling: which candidates it builds, and the tables it prints from a run
(the H200 run kept in docs/h200/build_breakdown)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("build_breakdown", REPO / "scripts" / "build_breakdown.py")
build_breakdown = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_breakdown)


def test_inputs_are_single_kernel_candidates_that_build_when_their_module_runs():
    names = [str(p.relative_to(REPO)) for p in build_breakdown.candidates()]
    assert names[:2] == ["tests/data/public/kernelbench/model_new_ex_add.py",
                         "tests/data/public/kernelbench_leaderboard/L1_37_kernel.py"]
    assert len(names) >= 12  # enough distinct kernels for 12 builds at once
    # load_inline inside forward(): running the module builds nothing
    assert "tests/data/decision/llm/cl1_l1_097_cosine_loss/candidate.py" not in names
    assert not any("/broken/" in n for n in names)


def test_the_tables_show_steps_variants_and_the_ratio_to_plain_load_inline():
    run = json.loads((REPO / "docs/h200/build_breakdown/breakdown.json").read_text())
    text = build_breakdown.tables(run)
    assert "| 1 | 48.1 | 2.5 | 17.6 | 22.674 | 1 |" in text  # one of the three builds is the forward-time one
    assert "| cuda.cudafe++ | 7.62 |" in text and "| total | 17.6 |" in text
    assert "| tests/data/public/kernelbench_leaderboard/L1_37_kernel.py | 60.754 | 22.674 | 0.37 |" in text
    assert "core 1, error 1, types.h 1; builds that compiled a narrowed unit first and then again with more " \
           "headers: 1" in text
