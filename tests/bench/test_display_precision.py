"""bench's console: a task whose best kernel is in reduced precision says so, with its fastest fp32 kernel's speedup,
and the progress line counts such tasks."""

from __future__ import annotations

from rich.console import Console

from kernelskill.bench.display import BenchDisplay
from kernelskill.bench.runner import BenchEvent
from kernelskill.report import TaskResult


def test_reduced_precision_is_said_per_task_and_counted():
    console = Console(record=True, width=200, color_system=None)
    display = BenchDisplay(console)
    display(BenchEvent(kind="start", text="2 tasks", total=2))
    for name, reduced, full in (("1_Matmul", True, 1.2), ("2_Relu", False, 1.5)):
        result = TaskResult(level="1", index=int(name[0]), name=name, problem=f"{name}.py", status="finished",
                            success=True, best_speedup=3.0 if reduced else 1.5, best_ms=1.0,
                            best_reduced_precision=reduced, best_speedup_full_precision=full)
        display(BenchEvent(kind="task_done", task=name, result=result))
    text = console.export_text()
    assert "1_Matmul: correct, 3x reduced precision (fastest fp32 kernel: 1.2x)" in text
    assert "2_Relu: correct, 1.5x" in text and "2_Relu: correct, 1.5x reduced" not in text
    assert "(1 in reduced precision)" in display.line()


def test_a_speedup_over_torch_compile_says_its_launch_paced_figure_where_that_differs():
    console = Console(record=True, width=200, color_system=None)
    display = BenchDisplay(console)
    display(BenchEvent(kind="start", text="2 tasks", total=2))
    for name, paced in (("86_Matmul_Divide_GELU", 2.84), ("96_ConvTranspose3d", 1.1)):
        result = TaskResult(level="2", index=int(name[:2]), name=name, problem=f"{name}.py", status="finished",
                            success=True, best_speedup=1.0, best_ms=1.0, speedup_vs_compile=1.05 if paced < 2 else 0.72,
                            speedup_vs_compile_host_paced=paced)
        display(BenchEvent(kind="task_done", task=name, result=result))
    text = console.export_text()
    assert "86_Matmul_Divide_GELU: correct, 1x, 0.72x vs torch.compile (2.84x at the launches' pace)" in text
    assert "1.05x vs torch.compile" in text and "1.1x at the launches' pace" not in text  # within 10%: said once
