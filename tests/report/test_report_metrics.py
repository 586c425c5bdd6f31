"""The figures of the hand-worked benchmark in conftest.py, each one computed on paper.

Means and shares are compared exactly: the inputs are binary fractions, so the sums are exact and each expected
value is the same division the code does. Geometric means go through log and exp, which round: those are compared to
1e-12 relative.
"""

from __future__ import annotations

import math

import pytest

from kernelskill.report import TaskResult, build_results, compute_metrics
from kernelskill.report.results import level_key
from kernelskill.loop.outcome import rounds_to_best_of
from tests.report.conftest import RUN, fixture_tasks


def geo(value: float) -> pytest.approx:
    return pytest.approx(value, rel=1e-12)


@pytest.fixture(scope="module")
def results():
    return build_results(RUN, fixture_tasks())


def test_level_1(results):
    m = results.levels["1"]
    # correct kernels: 1_Square 2.0, 2_ReLU 0.5; 3_Conv failed
    assert m.tasks == 3 and m.solved == 2
    assert m.success == 2 / 3
    assert m.speedup_mean == 1.25  # (2.0 + 0.5) / 2
    assert m.speedup_mean_all == 3.5 / 3  # (2.0 + 0.5 + 1.0) / 3
    assert m.speedup_geomean == geo(1.0)  # sqrt(2.0 * 0.5)
    assert m.speedup_median == 1.25
    assert m.fast_1 == 1 / 3  # only 1_Square; 2_ReLU is slower than eager
    assert m.fast_p == {"0.5": 2 / 3, "0.8": 1 / 3, "1.5": 1 / 3, "2": 1 / 3}  # 0.5 >= 0.5 and 2.0 >= 2 count
    assert m.tokens == 1600
    assert m.cost_usd == 0.75  # 3_Conv has no known cost
    assert m.rounds_to_best == 1.5  # (3 + 0) / 2


def test_level_2(results):
    m = results.levels["2"]
    # correct kernels: 1_Fused 4.0, 3_Norm 1.5; 2_Gemm has none; 4_Attn is still running (its 8.0 does not count)
    assert m.tasks == 4 and m.solved == 2
    assert m.success == 0.5
    assert m.speedup_mean == 2.75
    assert m.speedup_mean_all == 1.875  # (4.0 + 1.5 + 1.0 + 1.0) / 4
    assert m.speedup_geomean == geo(math.sqrt(6.0))
    assert m.speedup_median == 2.75
    assert m.fast_1 == 0.5
    assert m.fast_p == {"0.5": 0.5, "0.8": 0.5, "1.5": 0.5, "2": 0.25}
    assert m.tokens == 5500  # 2000 + 3000 + 400 + 100
    assert m.cost_usd == 1.75  # 1.0 + 0.75
    assert m.rounds_to_best == 3.5  # (5 + 2) / 2


def test_overall(results):
    m = results.overall
    assert m.tasks == 7 and m.solved == 4
    assert m.success == 4 / 7
    assert m.speedup_mean == 2.0  # (2.0 + 0.5 + 4.0 + 1.5) / 4
    assert m.speedup_mean_all == 11 / 7  # (8.0 + 3 * 1.0) / 7
    assert m.speedup_geomean == geo(6.0 ** 0.25)  # (2 * 0.5 * 4 * 1.5) ** (1/4)
    assert m.speedup_median == 1.75  # between 1.5 and 2.0
    assert m.fast_1 == 3 / 7
    assert m.fast_p == {"0.5": 4 / 7, "0.8": 3 / 7, "1.5": 3 / 7, "2": 2 / 7}
    assert m.tokens == 7100
    assert m.cost_usd == 2.5
    assert m.rounds_to_best == 2.5  # (3 + 0 + 5 + 2) / 4


def test_vs_compile(results):
    c1 = results.levels["1"].vs_compile
    # baseline: all three; compared: 1_Square 1.0, 2_ReLU 0.25; eager/compile: 4/2, 1/0.5, 2/1
    assert (c1.tasks_with_baseline, c1.tasks_compared) == (3, 2)
    assert c1.speedup_mean == 0.625
    assert c1.speedup_geomean == geo(0.5)
    assert c1.speedup_median == 0.625
    assert c1.fast_1 == 1 / 3  # 1.0 >= 1
    assert c1.fast_p == {"0.5": 1 / 3, "0.8": 1 / 3, "1.5": 0.0, "2": 0.0}
    assert c1.compile_vs_eager_mean == 2.0
    assert c1.compile_vs_eager_geomean == geo(2.0)

    c2 = results.levels["2"].vs_compile
    # baseline: 1_Fused, 2_Gemm, 4_Attn (3_Norm has none); compared: 1_Fused 2.0 (4_Attn is running)
    assert (c2.tasks_with_baseline, c2.tasks_compared) == (3, 1)
    assert c2.speedup_mean == 2.0 and c2.speedup_median == 2.0
    assert c2.speedup_geomean == geo(2.0)
    assert c2.fast_1 == 1 / 3
    assert c2.fast_p == {"0.5": 1 / 3, "0.8": 1 / 3, "1.5": 1 / 3, "2": 1 / 3}
    assert c2.compile_vs_eager_mean == 1.5  # 8/4 and 2/2; 4_Attn has no eager time
    assert c2.compile_vs_eager_geomean == geo(math.sqrt(2.0))

    c = results.overall.vs_compile
    assert (c.tasks_with_baseline, c.tasks_compared) == (6, 3)
    assert c.speedup_mean == 3.25 / 3  # (1.0 + 0.25 + 2.0) / 3
    assert c.speedup_median == 1.0
    assert c.speedup_geomean == geo(0.5 ** (1 / 3))
    assert c.fast_1 == 2 / 6
    assert c.fast_p == {"0.5": 2 / 6, "0.8": 2 / 6, "1.5": 1 / 6, "2": 1 / 6}
    assert c.compile_vs_eager_mean == 1.8  # (2 + 2 + 2 + 2 + 1) / 5
    assert c.compile_vs_eager_geomean == geo(16.0 ** (1 / 5))


def test_order_of_levels_and_tasks(results):
    assert list(results.levels) == ["1", "2"]
    assert [t.name for t in results.tasks] == ["1_Square", "2_ReLU", "3_Conv", "1_Fused", "2_Gemm", "3_Norm",
                                               "4_Attn"]
    assert sorted(["10", "level_10", "2", "conv", "level_2", "1"], key=level_key) == \
        ["1", "2", "10", "conv", "level_2", "level_10"]


def test_no_compile_baseline_and_no_cost():
    tasks = [TaskResult(name="a", level="x", index=None, problem="a.py", status="finished", success=True,
                        best_speedup=3.0)]
    m = compute_metrics(tasks)
    assert m.vs_compile is None and m.cost_usd is None and m.rounds_to_best is None
    assert (m.speedup_mean, m.speedup_mean_all, m.fast_1) == (3.0, 3.0, 1.0)


def test_no_tasks_and_no_correct_kernel():
    empty = compute_metrics([])
    assert (empty.tasks, empty.success, empty.speedup_mean, empty.speedup_mean_all, empty.fast_1) == \
        (0, 0.0, None, 1.0, 0.0)
    failed = compute_metrics([TaskResult(name="a", level="1", index=1, problem="a.py", status="failed",
                                         success=False, best_speedup=None)])
    assert (failed.success, failed.speedup_mean, failed.speedup_geomean, failed.speedup_median,
            failed.speedup_mean_all) == (0.0, None, None, None, 1.0)


def test_rounds_to_best_of_history():
    from tests.report.conftest import FUSED_HISTORY, SQUARE_HISTORY

    assert rounds_to_best_of(SQUARE_HISTORY) == 3
    assert rounds_to_best_of(FUSED_HISTORY) == 5
    assert rounds_to_best_of([]) is None
