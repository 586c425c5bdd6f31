"""Success and Speedup with and without reduced-precision results (fp32 problems solved in TF32/fp16 that pass only
the configured tolerance): counted per level, the fp32 figures from each task's fastest kernel that is not so
flagged, and a table only when the reviews recorded precision."""

from __future__ import annotations

import pytest

from kernelskill.report import TaskResult, build_results
from kernelskill.report.tables import precision_table


TF32 = {"cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": True, "float32_matmul_precision": "highest"}


def task(name: str, speedup: float | None, reduced: bool | None, full: float | None) -> TaskResult:
    return TaskResult(level="1", index=int(name[0]), name=name, problem=f"{name}.py", status="finished",
                      success=speedup is not None, best_speedup=speedup, best_ms=1.0, eager_ms=speedup,
                      best_reduced_precision=reduced, best_speedup_full_precision=full,
                      reference_tf32=TF32 if reduced is not None else None)


def test_reduced_precision_results_are_counted_and_the_fp32_figures_leave_them_out():
    results = build_results({}, [
        task("1_Matmul", 3.0, True, 1.2),   # TF32 best; an fp32 kernel of the task reached 1.2x
        task("2_Gemm", 2.0, True, None),    # every correct kernel in fp16: unsolved in fp32
        task("3_Relu", 1.5, False, 1.5),
        task("4_Conv", None, None, None),   # no correct kernel
    ])
    m = results.overall
    assert m.success == pytest.approx(3 / 4) and m.speedup_mean == pytest.approx(6.5 / 3)
    assert m.reduced_precision == 2
    assert m.success_full_precision == pytest.approx(2 / 4) and m.speedup_mean_full_precision == pytest.approx(1.35)
    table = precision_table(results)
    assert table is not None and table.rows[-1] == ["Overall", "4", "75.0%", "2.17x", "2", "50.0%", "1.35x"]
    # the TF32 switches the references ran under are stated
    assert ("Every reference ran with cuda.matmul.allow_tf32 off, cudnn.allow_tf32 on, float32_matmul_precision "
            "highest." in table.note)


def test_no_table_when_no_review_recorded_precision():
    results = build_results({}, [task("1_Matmul", 3.0, None, None), task("2_Gemm", None, None, None)])
    assert results.overall.success_full_precision is None and results.overall.reduced_precision == 0
    assert precision_table(results) is None
