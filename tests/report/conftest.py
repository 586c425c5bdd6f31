"""A small benchmark, by hand: seven tasks over two levels, and a run folder (run.db + results.json) holding it.

The numbers are chosen so that every figure of test_report_metrics.py can be worked out on paper:

    level 1   1_Square  finished  2.0x   eager 4  best 2  compile 2 (vs compile 1.0)   rounds_to_best 3  $0.25
              2_ReLU    finished  0.5x   eager 1  best 2  compile 0.5 (vs compile 0.25) rounds_to_best 0  $0.50
              3_Conv    failed    —      eager 2          compile 1                                        no cost
    level 2   1_Fused   finished  4.0x   eager 8  best 2  compile 4 (vs compile 2.0)   rounds_to_best 5  $1.00  flagged
              2_Gemm    finished  —      eager 2          compile 2    (no correct kernel; budget spent)   $0.75
              3_Norm    finished  1.5x   eager 3  best 2  no baseline                  rounds_to_best 2  no cost
              4_Attn    running   (8.0x so far: a running task counts as without a correct kernel) compile 1
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.report import TaskResult, build_results, write_results
from kernelskill.store import RunStore
from kernelskill.loop.outcome import RoundRecord

PROBLEM_SOURCE = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def rec(round_: int, branch: str, label: str | None, verdict: str, *, slot: int = 0, method: str | None = None,
        speedup: float | None = None, best: float | None = None, promoted: str | None = None,
        note: str = "") -> RoundRecord:
    """One line of a task's history."""
    return RoundRecord(round=round_, slot=slot, branch=branch, label=label, method=method, verdict=verdict,
                       speedup=speedup, ms=None if speedup is None else 4.0 / speedup, best_speedup=best,
                       promoted=promoted, note=note)


SQUARE_HISTORY = [
    rec(0, "seed", "seed-1", "correct", slot=1, speedup=1.2, best=1.2, promoted="best+base"),
    rec(0, "seed", "seed-2", "mismatch", slot=2, best=1.2),
    rec(1, "optimize", "round-01", "runtime_error", method="vectorize_loads", best=1.2),
    rec(2, "repair", "round-02", "correct", method="vectorize_loads", speedup=1.5, best=1.5, promoted="best"),
    rec(3, "optimize", "round-03", "correct", method="tile_smem", speedup=2.0, best=2.0, promoted="best+base"),
]
FUSED_HISTORY = [
    rec(0, "seed", "seed-1", "correct", slot=1, speedup=1.0, best=1.0, promoted="best+base"),
    rec(1, "optimize", "round-01", "correct", method="fuse_epilogue", speedup=1.6, best=1.6, promoted="best+base"),
    rec(2, "optimize", None, "no_candidate", method=None, best=1.6, note="planner reply unusable"),
    rec(3, "optimize", "round-03", "correct", method="tile_smem", speedup=3.0, best=3.0, promoted="best+base"),
    rec(4, "optimize", "round-04", "mismatch", method="split_k", best=3.0),
    rec(5, "repair", "round-05", "correct", method="split_k", speedup=4.0, best=4.0, promoted="best+base"),
]


def fixture_tasks() -> list[TaskResult]:
    def task(level, index, name, status, **kw):
        return TaskResult(level=level, index=index, name=name, problem=f"problems/level{level}/{name}.py",
                          status=status, **kw)

    return [
        # deliberately out of order: build_results sorts them
        task("2", 4, "4_Attn", "running", success=True, best_speedup=8.0, best_ms=0.5, eager_ms=None,
             compile_ms=1.0, speedup_vs_compile=5.0, rounds_run=2, tokens=100),
        task("1", 1, "1_Square", "finished", success=True, best_speedup=2.0, best_ms=2.0, eager_ms=4.0,
             compile_ms=2.0, speedup_vs_compile=1.0, best_path="kernels/1_Square/round-03.py", rounds_run=3,
             rounds_to_best=3, llm_calls=9, tokens=1000, cost_usd=0.25, seconds=120.0, history=SQUARE_HISTORY),
        task("1", 2, "2_ReLU", "finished", success=True, best_speedup=0.5, best_ms=2.0, eager_ms=1.0,
             compile_ms=0.5, speedup_vs_compile=0.25, rounds_run=1, rounds_to_best=0, tokens=500, cost_usd=0.5,
             history=[rec(0, "seed", "seed-1", "correct", slot=1, speedup=0.5, best=0.5, promoted="best+base"),
                      rec(1, "optimize", "round-01", "correct", method="vectorize_loads", speedup=0.4, best=0.5)]),
        task("1", 3, "3_Conv", "failed", reason="the model rejected the API key <oops>", success=False,
             best_speedup=None, eager_ms=2.0, compile_ms=1.0, tokens=100),
        task("2", 1, "1_Fused", "finished", success=True, best_speedup=4.0, best_ms=2.0, eager_ms=8.0,
             compile_ms=4.0, speedup_vs_compile=2.0, flags=["degenerate_reference:constant"], rounds_run=5,
             rounds_to_best=5, tokens=2000, cost_usd=1.0, history=FUSED_HISTORY),
        task("2", 2, "2_Gemm", "finished", reason="budget spent", success=False, best_speedup=None, eager_ms=2.0,
             compile_ms=2.0, rounds_run=4, tokens=3000, cost_usd=0.75,
             history=[rec(0, "seed", "seed-1", "compile_error", slot=1),
                      rec(1, "repair", "round-01", "mismatch"),
                      rec(2, "repair", "round-02", "mismatch", note="gave up after 2 repairs; back to base")]),
        task("2", 3, "3_Norm", "finished", success=True, best_speedup=1.5, best_ms=2.0, eager_ms=3.0,
             rounds_run=2, rounds_to_best=2, tokens=400,
             history=[rec(0, "seed", "seed-1", "correct", slot=1, speedup=1.1, best=1.1, promoted="best+base"),
                      rec(2, "optimize", "round-02", "correct", method="tile_smem", speedup=1.5, best=1.5,
                          promoted="best+base")]),
    ]


RUN = {"model": "fake:scripted", "backend": "triton", "seeds": 2, "rounds": 5, "ablation": "full",
       "baseline": "compile", "gpus": 1, "command": "kernelskill bench --level 1,2"}


def _decision(bottleneck: str, case: str, allowed: list[str]) -> dict:
    return {"bottleneck": bottleneck, "case": case, "case_status": "matched", "allowed_methods": allowed,
            "forbidden": ["warp_specialize"], "caveats": []}


def _add_kernels(store: RunStore, task_id: int, plan: list[tuple]) -> None:
    """plan: (round idx, branch, method, [(label, origin, parent label, correct, error_kind)], decision or None)."""
    ids: dict[str, int] = {}
    for idx, branch, method, kernels, decision in plan:
        round_id = store.start_round(task_id, idx, branch)
        for label, origin, parent, correct, error_kind in kernels:
            row = store.add_candidate(task_id, round_id, label, f"# {label}\n", origin=origin,
                                      parent_id=ids.get(parent))
            ids[label] = row.id
            store.add_review(row.id, {"correct": correct, "compiled": True, "error_kind": error_kind,
                                      "speedup": 9.99 if correct else None})  # 9.99: must never be shown
        if decision is not None:
            store.add_decision(round_id, ids.get(kernels[0][2]), decision)
        store.finish_round(round_id, "done", method=method, outcome={"round": idx, "branch": branch})


def make_run_folder(root: Path, *, with_store: bool = True, run: dict | None = None,
                    tasks: list[TaskResult] | None = None) -> Path:
    """A run folder as `kernelskill bench` leaves it: run.db (kind "bench") and results.json."""
    tasks = fixture_tasks() if tasks is None else tasks
    run = dict(RUN if run is None else run)
    if with_store:
        with RunStore.create(root) as store:
            run_id = store.add_run("bench", run["model"], {"rounds": run.get("rounds")})
            run["run_id"] = run_id
            # the store's task names are unique per run, so bench qualifies them; the report finds a task's row by
            # its task_id (given here for 1_Fused only), else by its problem path (the others)
            task_ids = {t.name: store.add_task(run_id, f"level{t.level}/{t.name}", t.problem, PROBLEM_SOURCE)
                        for t in tasks}
            tasks = [t.model_copy(update={"task_id": task_ids[t.name]}) if t.name == "1_Fused" else t for t in tasks]
            memory = _decision("memory_bound", "C2-coalescing", ["vectorize_loads", "tile_smem"])
            if "1_Square" in task_ids:
                _add_kernels(store, task_ids["1_Square"], [
                    (0, "seed", None, [("seed-1", "seed", None, True, None),
                                       ("seed-2", "seed", None, False, "mismatch")], None),
                    (1, "optimize", "vectorize_loads",
                     [("round-01", "optimize", "seed-1", False, "runtime_error")], memory),
                    (2, "repair", "vectorize_loads", [("round-02", "repair", "round-01", True, None)], None),
                    (3, "optimize", "tile_smem", [("round-03", "optimize", "seed-1", True, None)], memory),
                ])
            if "1_Fused" in task_ids:
                compute = _decision("compute_bound", "C5-epilogue", ["fuse_epilogue", "tile_smem", "split_k"])
                _add_kernels(store, task_ids["1_Fused"], [
                    (0, "seed", None, [("seed-1", "seed", None, True, None)], None),
                    (1, "optimize", "fuse_epilogue", [("round-01", "optimize", "seed-1", True, None)], compute),
                    (3, "optimize", "tile_smem", [("round-03", "optimize", "round-01", True, None)], compute),
                    (4, "optimize", "split_k", [("round-04", "optimize", "round-03", False, "mismatch")], compute),
                    (5, "repair", "split_k", [("round-05", "repair", "round-04", True, None)], None),
                ])
    else:
        root.mkdir(parents=True, exist_ok=True)
    write_results(root / "results.json", build_results(run, tasks))
    return root


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return make_run_folder(tmp_path / "run")
