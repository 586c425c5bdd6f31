"""report.html from the hand-worked run folder of conftest.py: well formed, self-contained, and holding its numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelskill.errors import KernelSkillError
from kernelskill.report import load_results, write_report
from tests.report.conftest import make_run_folder
from tests.report.dom import parse


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """The run folder of conftest.py with its report written once for the tests that only read the page (a report
    draws its plots with matplotlib: about a second of CPU each time)."""
    run_dir = make_run_folder(tmp_path_factory.mktemp("report") / "run")
    paths = write_report(run_dir)
    assert [p.name for p in paths] == ["report.html", "summary.md", "tasks.csv"]
    return run_dir


@pytest.fixture
def page(written):
    text = (written / "report.html").read_text(encoding="utf-8")
    return text, parse(text)


def section(doc, key):
    found = doc.find_id(key)
    assert found is not None and found.tag == "section", f"no <section id={key!r}>"
    return found


def test_summary_table_holds_the_figures_of_results_json(page, written):
    _, doc = page
    rows = doc.find_id("summary-table").table_rows()
    assert rows[0][:5] == ["Level", "Tasks", "Success", "Speedup", "Fast_1"]
    body = {row[0]: row for row in rows[1:]}
    # success %, mean speedup (tasks with a correct kernel), Fast_1, as worked out in test_report_metrics.py
    assert body["Level 1"][1:5] == ["3", "66.7%", "1.25x", "33.3%"]
    assert body["Level 2"][1:5] == ["4", "50.0%", "2.75x", "50.0%"]
    assert body["Overall"][1:5] == ["7", "57.1%", "2.00x", "42.9%"]
    assert body["Level 2"][5:8] == ["2.45x", "2.75x", "1.88x"]  # geomean sqrt(6), median, mean over all tasks
    assert body["Overall"][8:] == ["57.1%", "42.9%", "42.9%", "28.6%", "0"]  # fast_0.5, 0.8, 1.5, 2; noisy
    compile_rows = {row[0]: row for row in doc.find_id("compile-table").table_rows()[1:]}
    assert compile_rows["Level 1"][1:5] == ["3", "2", "0.625x", "33.3%"]
    assert compile_rows["Overall"][1:4] == ["6", "3", "1.08x"]
    # and every value shown is the one in results.json, formatted
    results = load_results(written / "results.json")
    assert body["Level 1"][3] == f"{results.levels['1'].speedup_mean:#.3g}x"
    assert body["Overall"][2] == f"{100 * results.overall.success:.1f}%"


def test_each_task_best_speedup_is_shown(page):
    _, doc = page
    shown = {}
    for table_id in ("tasks-1", "tasks-2"):
        rows = doc.find_id(table_id).table_rows()
        assert rows[0][:3] == ["Task", "Status", "Best speedup"]
        shown.update({row[0]: row[2] for row in rows[1:]})
    assert shown == {"1_Square": "2.00x", "2_ReLU": "0.500x", "3_Conv": "—", "1_Fused": "4.00x (degenerate_reference:constant)", "2_Gemm": "—",
                     "3_Norm": "1.50x", "4_Attn": "8.00x"}


def test_plots_are_inline_svg_per_section(page):
    _, doc = page
    count = {key: len(list(section(doc, key).iter("svg"))) for key in ("distributions", "per-task", "convergence")}
    assert count == {"distributions": 1, "per-task": 2, "convergence": 2}  # one per level where per level
    assert len(list(doc.iter("svg"))) == 5
    assert len(list(section(doc, "summary").iter("svg"))) == 0


def test_page_is_self_contained(page):
    text, doc = page
    assert "http://" not in text and "https://" not in text  # nothing in this run names a URL
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:[a-z]+:)?//""", text, re.IGNORECASE)
    assert "@import" not in text
    assert set(re.findall(r"url\((.)", text)) <= {"#"}  # the plots' clip paths, within the page
    assert not list(doc.iter("script")) and not list(doc.iter("link")) and not list(doc.iter("img"))
    ids = [e.attrs["id"] for e in doc.iter() if "id" in e.attrs]
    assert len(ids) == len(set(ids))  # several plots on one page: their clip paths and markers must not clash
    for ref in re.findall(r"""(?:url\(|xlink:href=")#([^)"]+)""", text):
        assert doc.find_id(ref) is not None, ref
    for a in doc.iter("a"):
        assert a.attrs["href"].startswith("#")  # links only within the page
        assert doc.find_id(a.attrs["href"][1:]) is not None, a.attrs["href"]


def test_values_are_escaped(page):
    text, doc = page
    assert "<oops>" not in text and "&lt;oops&gt;" in text
    assert "the model rejected the API key <oops>" in section(doc, "flagged").text()


def test_tree_shows_promotions_nesting_and_decisions(page):
    _, doc = page
    square = doc.find_id("task-1-1_Square")
    assert square.tag == "details"
    text = square.text()
    assert "→ best+base" in text and "→ best" in text
    assert "bottleneck memory_bound" in text and "C2-coalescing" in text
    decisions = square.by_class("decision")
    assert len(decisions) == 2  # rounds 1 and 3 optimized; the repair and the seeds had no decision
    assert "allowed methods: vectorize_loads, tile_smem" in decisions[0].text()
    assert [e.text() for e in decisions[0].by_class("chosen")] == ["vectorize_loads"]
    assert [e.text() for e in decisions[1].by_class("chosen")] == ["tile_smem"]
    # round-02 repaired round-01, which optimized seed-1; round-03 optimized seed-1 again (the base)
    nodes = {code.text(): code.parent.parent for code in square.iter("code") if code.parent.tag == "div"}
    assert nodes["round-02"].parent.parent is nodes["round-01"]
    assert nodes["round-01"].parent.parent is nodes["seed-1"]
    assert nodes["round-03"].parent.parent is nodes["seed-1"]
    assert "9.99" not in text  # the review's own paired figure is not shown: the history's is
    assert "1.50x" in text and "1.20x" in text
    fused = doc.find_id("task-2-1_Fused").text()
    assert "allowed methods: fuse_epilogue, tile_smem, split_k" in fused
    assert "no_candidate — planner reply unusable" in fused


def test_tree_from_history_when_the_store_has_no_kernels(page):
    _, doc = page
    gemm = doc.find_id("task-2-2_Gemm")
    assert "Rebuilt from the history" in gemm.text()
    nodes = {code.text(): code.parent.parent for code in gemm.iter("code") if code.parent.tag == "div"}
    assert nodes["round-01"].parent.parent is nodes["seed-1"]  # a repair grows from the kernel that failed
    assert nodes["round-02"].parent.parent is nodes["round-01"]


def test_flagged_section(page):
    _, doc = page
    rows = {row[0]: row for row in doc.find_id("flagged-table").table_rows()[1:]}
    assert set(rows) == {"3_Conv", "1_Fused", "2_Gemm", "4_Attn"}
    assert rows["1_Fused"][4] == "degenerate_reference:constant"
    assert rows["3_Conv"][2] == "failed" and rows["3_Conv"][5] == "the model rejected the API key <oops>"
    assert rows["2_Gemm"][5] == "budget spent" and rows["4_Attn"][2] == "not finished"
    assert "1_Square" not in rows


def test_table_of_contents_names_every_section(page):
    _, doc = page
    toc = [a.attrs["href"] for a in next(e for e in doc.iter("nav")).iter("a")]
    assert toc == ["#summary", "#distributions", "#per-task", "#convergence", "#trees", "#flagged"]


def test_without_run_db_the_trees_come_from_the_history(tmp_path):
    run = make_run_folder(tmp_path / "plain", with_store=False)
    write_report(run)
    doc = parse((run / "report.html").read_text(encoding="utf-8"))
    square = doc.find_id("task-1-1_Square")
    assert "Rebuilt from the history (no run.db)" in square.text()
    nodes = {code.text(): code.parent.parent for code in square.iter("code") if code.parent.tag == "div"}
    assert nodes["round-02"].parent.parent is nodes["round-01"]
    assert nodes["round-03"].parent.parent is nodes["seed-1"]
    assert not square.by_class("decision")


def test_compare_lays_runs_side_by_side(tmp_path, run_dir):
    from tests.report.conftest import RUN, fixture_tasks

    other_tasks = [t.model_copy(update={"best_speedup": 1.0}) if t.best_speedup else t for t in fixture_tasks()]
    other = make_run_folder(tmp_path / "ablated", with_store=False, tasks=other_tasks,
                            run={**RUN, "ablation": "no-long-term-memory"})
    unnamed = make_run_folder(tmp_path / "baseline-run", with_store=False, run={**RUN, "ablation": None})
    write_report(run_dir, [other, unnamed / "results.json"])
    doc = parse((run_dir / "report.html").read_text(encoding="utf-8"))
    rows = doc.find_id("ablation-table").table_rows()
    assert rows[0] == ["", "full", "no-long-term-memory", "baseline-run"]  # ablation label, else the folder
    assert rows[1] == ["Level"] + ["Success", "Speedup", "Fast_1"] * 3
    body = {row[0]: row[1:] for row in rows[2:]}
    assert body["Level 1"] == ["66.7%", "1.25x", "33.3%", "66.7%", "1.00x", "66.7%", "66.7%", "1.25x", "33.3%"]
    assert body["Overall"] == ["57.1%", "2.00x", "42.9%", "57.1%", "1.00x", "57.1%", "57.1%", "2.00x", "42.9%"]
    assert "#ablation" in [a.attrs["href"] for a in doc.iter("a")]
    md = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "| Level 1 | 66.7% | 1.25x | 33.3% | 66.7% | 1.00x | 66.7% |" in md
    assert "no-long-term-memory Speedup" in md


def test_errors_a_user_can_fix(tmp_path, run_dir):
    with pytest.raises(KernelSkillError, match=r"empty holds no results\.json.*kernelskill bench"):
        (tmp_path / "empty").mkdir()
        write_report(tmp_path / "empty")
    with pytest.raises(KernelSkillError, match=r"--compare .*missing: no results\.json there"):
        write_report(run_dir, [tmp_path / "missing"])
    assert not (run_dir / "report.html").exists()  # nothing half-written


def test_a_damaged_run_db_falls_back_to_the_histories(tmp_path):
    run = make_run_folder(tmp_path / "run", with_store=False)
    (run / "run.db").write_bytes(b"this is not a database" * 100)
    write_report(run)
    doc = parse((run / "report.html").read_text(encoding="utf-8"))
    assert "the run store could not be read" in section(doc, "trees").text()
    assert "→ best+base" in doc.find_id("task-1-1_Square").text()


def test_same_name_in_two_levels_keeps_two_trees(tmp_path):
    from kernelskill.report import TaskResult
    from tests.report.conftest import FUSED_HISTORY, SQUARE_HISTORY

    tasks = [TaskResult(name="1_Same", level=level, index=1, problem=f"l{level}/1_Same.py", status="finished",
                        success=True, best_speedup=speedup, rounds_run=1, history=history)
             for level, speedup, history in (("1", 2.0, SQUARE_HISTORY), ("2", 4.0, FUSED_HISTORY))]
    run = make_run_folder(tmp_path / "run", with_store=False, tasks=tasks)
    write_report(run)
    doc = parse((run / "report.html").read_text(encoding="utf-8"))
    one, two = doc.find_id("task-1-1_Same").text(), doc.find_id("task-2-1_Same").text()
    assert "tile_smem" in one and "fuse_epilogue" not in one and "1 round" in one and "1 rounds" not in one
    assert "fuse_epilogue" in two and "vectorize_loads" not in two


@pytest.mark.parametrize("case", ["no tasks", "nothing solved, no baseline"])
def test_edge_cases_still_give_a_page(tmp_path, case):
    from kernelskill.report import TaskResult

    tasks = [] if case == "no tasks" else [
        TaskResult(name="1_A", level="custom", index=1, problem="a.py", status="failed", success=False,
                   best_speedup=None, reason="crash"),
        TaskResult(name="B", level="custom", index=None, problem="b.py", status="pending", success=False,
                   best_speedup=None)]
    run = make_run_folder(tmp_path / "run", with_store=False, tasks=tasks)
    write_report(run)
    text = (run / "report.html").read_text(encoding="utf-8")
    doc = parse(text)
    assert doc.find_id("compile-table") is None  # no baseline taken: no torch.compile table
    assert len(list(section(doc, "distributions").iter("svg"))) == 1
    if tasks:
        assert "no task has a correct kernel yet" in section(doc, "distributions").text()
        assert [row[:3] for row in doc.find_id("summary-table").table_rows()[1:]] == \
            [["custom", "2", "0.0%"], ["Overall", "2", "0.0%"]]
        assert {row[0] for row in doc.find_id("flagged-table").table_rows()[1:]} == {"1_A", "B"}


def test_the_run_settings_are_folded_so_the_summary_is_on_the_first_screen(page):
    # about two dozen settings rows, the loop's and the review's as JSON, stood between the title and the results
    text, doc = page
    folded = doc.by_class("run")
    details = [e for e in folded if e.tag == "details"]
    assert len(details) == 1 and "open" not in details[0].attrs, [(e.tag, e.attrs) for e in folded]
    assert [e.tag for e in details[0].iter("table")] == ["table"]  # the settings table is inside the fold
    assert text.index('<details class="run">') < text.index('id="summary"')
