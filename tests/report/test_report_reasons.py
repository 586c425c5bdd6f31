"""The report's trees say why a kernel failed, say each missing-evidence list once, never show "allowed methods:
none" beside an applied method, and the convergence plot has a legend."""

from __future__ import annotations

from kernelskill.report import TaskResult, write_report
from kernelskill.report.plots import convergence_svg
from kernelskill.store import RunStore
from tests.report.conftest import PROBLEM_SOURCE, make_run_folder, rec
from tests.report.dom import parse

CAVEAT = ("higher-priority rules could not be evaluated, so the fallback structural_fallback decided: "
          "many_tiny_launches (missing: launches_per_forward); sm_saturated (missing: dram_throughput_pct, "
          "sm_throughput_pct); memory_saturated (missing: dram_throughput_pct, sm_throughput_pct)")


def task(name: str, history: list, **kw) -> TaskResult:
    values = dict(level="1", index=int(name.split("_")[0]), name=name, problem=f"problems/{name}.py",
                  status="finished", success=False, best_speedup=None, rounds_run=2, history=history)
    values.update(kw)
    return TaskResult(**values)


def page(run_dir):
    write_report(run_dir)
    return parse((run_dir / "report.html").read_text(encoding="utf-8"))


def test_failed_nodes_show_their_reason_from_the_history(tmp_path):
    failed = rec(0, "seed", "seed-1", "compile_error", slot=1)
    failed.reason = "kernel.py:3: error: expected ';' <here>"
    run_dir = make_run_folder(tmp_path / "run", with_store=False, tasks=[task("1_a", [failed])])
    reasons = page(run_dir).find_id("task-1-1_a").by_class("reason")
    assert [r.text() for r in reasons] == ["kernel.py:3: error: expected ';' <here>"]


def test_a_history_without_reasons_takes_them_from_the_stores_reviews(tmp_path):
    root = tmp_path / "run"
    with RunStore.create(root) as store:
        run_id = store.add_run("bench", "fake:", {})
        task_id = store.add_task(run_id, "1_a", "problems/1_a.py", PROBLEM_SOURCE)
        round_id = store.start_round(task_id, 0, "seed")
        row = store.add_candidate(task_id, round_id, "seed-1", "# seed\n", origin="seed")
        store.add_review(row.id, {"correct": False, "compiled": True, "error_kind": "rejected",
                                  "error": "rejected by check static:try-fallback: a try/except around the kernel",
                                  "checks": [{"name": "static:try-fallback", "detail": "a try/except"}]})
        store.finish_round(round_id, "done")
    make_run_folder(root, with_store=False, run={"run_id": run_id},
                    tasks=[task("1_a", [rec(0, "seed", "seed-1", "rejected", slot=1)], task_id=task_id)])
    reasons = page(root).find_id("task-1-1_a").by_class("reason")
    assert [r.text() for r in reasons] == ["rejected by check static:try-fallback: a try/except around the kernel"]


def test_decisions_collapse_missing_lists_and_name_a_free_choice(tmp_path):
    root = tmp_path / "run"
    history = [rec(0, "seed", "seed-1", "correct", slot=1, speedup=1.0, best=1.0, promoted="best+base"),
               rec(1, "optimize", "round-01", "correct", method="kernel_fusion", speedup=1.1, best=1.1),
               rec(2, "optimize", "round-02", "correct", method="cuda_graphs", speedup=1.0, best=1.1)]
    no_case = {"bottleneck": "structural_fallback", "case": None, "allowed_methods": [], "forbidden": ["split_k"],
               "caveats": ["ncu metrics: not_provided", CAVEAT]}
    with RunStore.create(root) as store:
        run_id = store.add_run("bench", "fake:", {})
        task_id = store.add_task(run_id, "1_a", "problems/1_a.py", PROBLEM_SOURCE)
        ids = {}
        for idx, label, origin, parent in ((0, "seed-1", "seed", None), (1, "round-01", "optimize", "seed-1"),
                                           (2, "round-02", "optimize", "seed-1")):
            round_id = store.start_round(task_id, idx, origin)
            ids[label] = store.add_candidate(task_id, round_id, label, f"# {label}\n", origin=origin,
                                             parent_id=ids.get(parent)).id
            store.add_review(ids[label], {"correct": True, "compiled": True})
            if parent:
                store.add_decision(round_id, ids[parent], no_case)
            store.finish_round(round_id, "done")
    make_run_folder(root, with_store=False, run={"run_id": run_id},
                    tasks=[task("1_a", history, task_id=task_id, success=True, best_speedup=1.1)])
    doc = page(root)
    first, second = (d.text() for d in doc.find_id("task-1-1_a").by_class("decision"))
    assert "allowed methods: none" not in first + second
    assert "free choice (no case allowed a method, so every method not forbidden was open): the Planner chose " \
           "kernel_fusion" in first
    assert "sm_saturated, memory_saturated (missing: dram_throughput_pct, sm_throughput_pct)" in first
    assert first.count("dram_throughput_pct") == 1
    assert "caveats: as under round-01" in second and "missing" not in second


def test_collapse_missing_leaves_other_caveats_alone():
    from kernelskill.report.html import collapse_missing

    assert collapse_missing("ncu metrics: not_provided; metric fields are unknown") == \
        "ncu metrics: not_provided; metric fields are unknown"
    assert collapse_missing("so X decided: a (missing: x); b (missing: y)") == "so X decided: a (missing: x); b (missing: y)"


def test_convergence_lines_have_a_legend():
    def solved(name, best):
        return task(name, [rec(0, "seed", "seed-1", "correct", slot=1, speedup=best, best=best)], success=True,
                    best_speedup=best)

    few = convergence_svg([solved("1_a", 1.5), solved("2_b", 2.0)], "1", "conv-few")
    assert "1_a" in few and "2_b" in few and "mean over tasks with a correct kernel" in few
    many = convergence_svg([solved(f"{i}_t", 1.0 + i / 10) for i in range(1, 13)], "1", "conv-many")
    assert many.count("one thin line per task") == 1 and "3_t" not in many
