"""results.json (round trip, atomic write, load errors), summary.md and tasks.csv."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from kernelskill.errors import KernelSkillError
from kernelskill.report import (
    BenchResults,
    build_results,
    load_results,
    report_command,
    write_report,
    write_results,
)
from tests.report.conftest import RUN, fixture_tasks


@pytest.fixture
def results() -> BenchResults:
    return build_results(RUN, fixture_tasks())


def test_round_trip(tmp_path, results):
    path = tmp_path / "out" / "results.json"
    write_results(path, results)
    loaded = load_results(path)
    assert loaded == results
    assert load_results(tmp_path / "out") == results  # a run folder stands for its results.json
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1
    assert list(data) == ["schema_version", "generated_at", "run", "overall", "levels", "tasks"]
    assert data["tasks"][0]["history"][0]["promoted"] == "best+base"
    assert data["levels"]["1"]["fast_p"] == {"0.5": 2 / 3, "0.8": 1 / 3, "1.5": 1 / 3, "2": 1 / 3}


def test_write_is_atomic(tmp_path, results, monkeypatch):
    path = tmp_path / "results.json"
    write_results(path, results)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    changed = build_results({**RUN, "model": "other"}, fixture_tasks()[:2])
    with pytest.raises(OSError):
        write_results(path, changed)
    assert path.read_bytes() == before  # the old file is whole
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # and no temporary file is left behind


def test_load_errors_name_the_file(tmp_path):
    missing = tmp_path / "nowhere" / "results.json"
    with pytest.raises(KernelSkillError, match=r"no benchmark results at .*nowhere.*results\.json.*kernelskill bench"):
        load_results(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"run": {}, "overall": ')
    with pytest.raises(KernelSkillError, match=r"broken\.json is not valid JSON \(.* at line 1"):
        load_results(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"run": {}, "tasks": [{"name": "x"}]}))
    with pytest.raises(KernelSkillError, match=r"wrong\.json is not a kernelskill results file: overall: Field required"):
        load_results(wrong)
    not_utf8 = tmp_path / "binary.json"
    not_utf8.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(KernelSkillError, match=r"cannot read .*binary\.json"):
        load_results(not_utf8)


def test_summary_markdown(run_dir):
    write_report(run_dir)
    md = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert md.startswith("# KernelSkill benchmark: run\n")
    assert "| Level | Tasks | Success | Speedup | Fast_1 | Geomean | Median | Speedup (all) | fast_0.5 | fast_0.8 | " \
           "fast_1.5 | fast_2 |" in md
    assert "| Level 1 | 3 | 66.7% | 1.25x | 33.3% | 1.00x | 1.25x | 1.17x | 66.7% | 33.3% | 33.3% | 33.3% |" in md
    assert "| Level 2 | 4 | 50.0% | 2.75x | 50.0% | 2.45x | 2.75x | 1.88x | 50.0% | 50.0% | 50.0% | 25.0% |" in md
    assert "| Overall | 7 | 57.1% | 2.00x | 42.9% | 1.57x | 1.75x | 1.57x | 57.1% | 42.9% | 42.9% | 28.6% |" in md
    assert "## Results vs torch.compile" in md and "| Overall | 6 | 3 | 1.08x | 33.3% |" in md
    assert "| Overall | 7 | 7,100 | 1,014 | $2.5000 | 2.5 |" in md
    assert "- `1_Fused` (Level 2, finished): degenerate_reference:constant" in md
    assert "- `3_Conv` (Level 1, failed): the model rejected the API key &lt;oops&gt;" in md
    assert "\n\n## Results vs PyTorch eager\n\n" in md
    assert "Runs compared" not in md  # only with --compare


def test_tasks_csv(run_dir):
    write_report(run_dir)
    text = (run_dir / "tasks.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["name", "level", "index", "status", "success", "best_speedup", "best_speedup_median",
                             "best_spread", "best_speedup_full_precision", "best_reduced_precision", "timing_noisy",
                             "speedup_caveats", "speedup_vs_compile", "speedup_vs_compile_host_paced", "eager_ms", "best_ms",
                             "compile_ms", "sol_ms", "pct_of_sol", "rounds_run", "rounds_to_best", "tokens",
                             "cost_usd", "flags", "reason", "best_path"]
    assert [r["name"] for r in rows] == ["1_Square", "2_ReLU", "3_Conv", "1_Fused", "2_Gemm", "3_Norm", "4_Attn"]
    by_name = {r["name"]: r for r in rows}
    assert by_name["1_Square"] == {
        "name": "1_Square", "level": "1", "index": "1", "status": "finished", "success": "True",
        "best_speedup": "2.0", "best_speedup_median": "", "best_spread": "", "best_speedup_full_precision": "",
        "best_reduced_precision": "", "timing_noisy": "", "speedup_caveats": "",
        "speedup_vs_compile": "1.0", "speedup_vs_compile_host_paced": "", "eager_ms": "4.0", "best_ms": "2.0", "compile_ms": "2.0",
        "sol_ms": "", "pct_of_sol": "", "rounds_run": "3", "rounds_to_best": "3", "tokens": "1000", "cost_usd": "0.25",
        "flags": "", "reason": "",
        "best_path": "kernels/1_Square/round-03.py"}
    assert by_name["1_Fused"]["flags"] == "degenerate_reference:constant"
    assert by_name["1_Fused"]["speedup_caveats"] == "degenerate_reference:constant"  # beside its figure
    assert (by_name["3_Conv"]["success"], by_name["3_Conv"]["best_speedup"], by_name["3_Conv"]["reason"]) == \
        ("False", "", "the model rejected the API key <oops>")


def test_flags_are_joined_with_semicolons(tmp_path):
    from tests.report.conftest import make_run_folder

    tasks = fixture_tasks()
    tasks[1] = tasks[1].model_copy(update={"flags": ["degenerate_reference:constant", "speedup_over_10x_reverified"]})
    run = make_run_folder(tmp_path / "run", with_store=False, tasks=tasks)
    write_report(run)
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO((run / "tasks.csv").read_text()))}
    assert rows["1_Square"]["flags"] == "degenerate_reference:constant;speedup_over_10x_reverified"


def test_report_command_prints_where_the_files_are(run_dir):
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200)
    paths = report_command(run_dir, [], console=console)
    out = console.file.getvalue()
    for path in paths:
        assert str(path) in out


def test_a_summary_of_an_unfinished_run_says_so(results):
    # An interrupted bench (the CUDA-L1 run on the H200: 123 of 250 tasks pending) would otherwise read as 0%
    # success on the levels it never reached.
    from kernelskill.report.build import summary_markdown

    for t in results.tasks:
        t.status = "finished"
    assert "not finished" not in summary_markdown(results, "run").split("## Results vs PyTorch eager")[0]
    results.tasks[0].status = "pending"
    results.tasks[1].status = "running"
    head = summary_markdown(results, "run").split("## Results vs PyTorch eager")[0]
    assert f"**2 of the {len(results.tasks)} tasks are not finished**" in head and "--resume" in head
    from kernelskill.report.html import _header

    assert f"<strong>2 of the {len(results.tasks)} tasks are not finished</strong>" in _header(results)
