"""Benchmark results and the report: results.json (typed), the paper's metrics, report.html / summary.md / tasks.csv.

    results.py   TaskResult, BenchResults; build, write (atomically), load results.json
    metrics.py   Metrics, CompileMetrics: Success, Speedup, Fast_1, geomean, median, fast_p, vs torch.compile
    tables.py    the tables as formatted text (shared by the HTML and the Markdown) and the number formats
    plots.py     matplotlib → inline SVG (imported lazily)
    trees.py     each task's optimization tree, from run.db or from its history
    html.py      the self-contained page
    build.py     write_report / report_command: what `kernelskill report` runs
"""

from kernelskill.report.build import report_command, write_report
from kernelskill.report.metrics import CompileMetrics, Metrics, compute_metrics
from kernelskill.report.results import (
    RESULTS_NAME,
    BenchResults,
    TaskResult,
    build_results,
    load_results,
    write_results,
)

__all__ = [
    "RESULTS_NAME",
    "BenchResults",
    "CompileMetrics",
    "Metrics",
    "TaskResult",
    "build_results",
    "compute_metrics",
    "load_results",
    "report_command",
    "write_report",
    "write_results",
]
