"""A task whose best kernel was timed noisily: counted, and marked beside its speedup, with its median and spread."""

from __future__ import annotations

from kernelskill.report import TaskResult, build_results
from kernelskill.report.tables import summary_table, task_columns, task_row


def task(name: str, noisy: str | None) -> TaskResult:
    return TaskResult(level="1", index=1, name=name, problem=f"{name}.py", status="finished", success=True,
                      best_speedup=7.8, best_ms=1.0, eager_ms=7.8, best_speedup_median=1.1, best_spread=0.4,
                      timing_noisy=noisy)


def test_noisy_tasks_are_counted_and_marked():
    results = build_results({}, [task("1_A", "candidate mean +600% off its median"), task("2_B", None)])
    assert results.overall.noisy == 1 and results.levels["1"].noisy == 1
    table = summary_table(results)
    assert table.columns[-1] == "Noisy" and table.rows[-1][-1] == "1"
    columns = task_columns(False)
    rows = {t.name: dict(zip(columns, task_row(t, False))) for t in results.tasks}
    assert rows["1_A"]["Best speedup"] == "7.80x (noisy timing)" and rows["2_B"]["Best speedup"] == "7.80x"
    assert rows["1_A"]["Median"] == "1.10x" and rows["1_A"]["Spread"] == "±40%"


def test_the_task_table_has_both_speedups_over_torch_compile():
    t = task("86_Matmul_Divide_GELU", None).model_copy(update={
        "compile_ms": 0.016, "speedup_vs_compile": 0.72, "speedup_vs_compile_host_paced": 2.84})
    columns = task_columns(True)
    row = dict(zip(columns, task_row(t, True)))
    assert len(columns) == len(task_row(t, True))
    assert row["vs compile"] == "0.720x" and row["vs compile, back to back"] == "2.84x"
