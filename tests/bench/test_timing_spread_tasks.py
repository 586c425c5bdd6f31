"""scripts/timing_spread.py's choice of tasks: from a run's results.json, with the kernels from the run's best/ or
from a re-imported corpus (a GPU lease keeps no run folder, the committed results.json is all that is left)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("timing_spread", REPO / "scripts" / "timing_spread.py")
spread = importlib.util.module_from_spec(spec)
sys.modules["timing_spread"] = spread
spec.loader.exec_module(spread)


def write_run(run: Path, eager_ms: dict[tuple[str, str], float]) -> None:
    tasks = [{"name": name, "level": level, "success": True, "eager_ms": ms, "best_path": f"best/{name}.py",
              "problem": f"problems/level{level}/{name}.py"} for (level, name), ms in eager_ms.items()]
    tasks.append({"name": "broken", "level": "1", "success": False, "eager_ms": 0.001, "best_path": None,
                  "problem": "problems/level1/broken.py"})
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"tasks": tasks}))


def test_the_smallest_level_1_tasks_come_first_then_log_spaced(tmp_path):
    times = {("1", f"t{i}"): 0.005 * (i + 1) for i in range(12)}  # 5 us ... 60 us
    times |= {("2", "mid"): 1.0, ("3", "big"): 40.0, ("3", "too_big"): 80.0}
    write_run(tmp_path / "run", times)
    tasks = spread.pick_tasks(tmp_path / "run", count=13, max_ms=50.0)
    names = [t["task"] for t in tasks]
    assert names[:10] == [f"L1/t{i}" for i in range(10)]  # the 10 smallest level-1 reference times
    assert "L3/big" in names and "L3/too_big" not in names and "L1/broken" not in names
    assert [t["eager_ms"] for t in tasks] == sorted(t["eager_ms"] for t in tasks)
    assert tasks[0]["kernel"] == str(tmp_path / "run" / "best" / "t0.py")


def test_kernels_can_come_from_a_corpus_instead_of_the_run(tmp_path):
    write_run(tmp_path / "run", {("1", "Sigmoid"): 0.005, ("3", "GRU"): 30.0})
    tasks = spread.pick_tasks(tmp_path / "run", count=2, kernels=tmp_path / "corpus" / "kernels")
    assert [t["kernel"] for t in tasks] == [str(tmp_path / "corpus" / "kernels" / "level1" / "Sigmoid.py"),
                                            str(tmp_path / "corpus" / "kernels" / "level3" / "GRU.py")]


def test_the_committed_h200_run_and_a_corpus_import_name_the_same_files():
    """docs/h200/kernelbench/results.json (the 250-task CUDA-L1 run) names every chosen task's problem under
    .devdata/corpus/problems, the folder `kernelskill corpus import` writes, and its kernel by level and name."""
    tasks = spread.pick_tasks(REPO / "docs" / "h200" / "kernelbench", 30, 50.0, Path("CORPUS/kernels"))
    assert len(tasks) == 30 and tasks[0]["eager_ms"] < 0.01 and tasks[-1]["eager_ms"] <= 50.0
    for t in tasks:
        level, name = t["task"][1], t["task"].split("/", 1)[1]
        assert t["problem"] == f".devdata/corpus/problems/level{level}/{name}.py"
        assert t["kernel"] == f"CORPUS/kernels/level{level}/{name}.py"


def test_an_excluded_task_gives_its_place_to_the_next_nearest_and_the_spacing_stays():
    # L3/35 was rated correct by the committed run and is rejected by a check added since (it reads freed memory):
    # excluding it must not move the other picks, only put the task nearest its place in it
    run = REPO / "docs" / "h200" / "kernelbench"
    before = [t["task"] for t in spread.pick_tasks(run, 30, 50.0)]
    after = [t["task"] for t in spread.pick_tasks(run, 30, 50.0, exclude=("L3/35",))]
    assert "L3/35_LTSM" in before and "L3/35_LTSM" not in after and len(after) == 30
    assert set(before) - set(after) == {"L3/35_LTSM"} and len(set(after) - set(before)) == 1


def test_a_task_counts_towards_the_target_only_once_both_conditions_are_measured(capsys):
    # a run stopped by its budget can leave a task with its quiet reviews only: it is named as not finished, not
    # counted as meeting the target on half the evidence
    def row(task, condition, protocol, x):
        return {"task": task, "condition": condition, "protocol": protocol, "repeat": 0, "speedup": x,
                "speedup_trimmed": x, "correct": True, "noisy": None, "strict_ok": True, "reduced_precision": False}

    tasks = [{"task": "L1/1_a", "eager_ms": 0.01}, {"task": "L3/2_b", "eager_ms": 20.0}]
    rows = [row("L1/1_a", c, "robust", x) for c in ("quiet", "busy") for x in (1.0, 1.01)]
    rows += [row("L3/2_b", "quiet", "robust", x) for x in (1.0, 1.01)]
    spread.table(rows, tasks, ("robust",))
    assert ("robust: 1 of 1 tasks within 1.05 quiet and busy (1 within 1.02 above 1 ms); not finished: L3/2"
            in capsys.readouterr().out)


def test_the_issue_s_bar_and_the_table_s_stricter_one_are_counted_apart(capsys):
    # issue 31 asks for 1.05; the table also holds tasks above 1 ms to 1.02. A task at 1.035 above 1 ms meets the
    # first and not the second, and a review whose mean was pulled by a few slow samples counts against the means'
    def row(task, condition, x, mean=None):
        return {"task": task, "condition": condition, "protocol": "graphed", "repeat": 0, "speedup": mean or x,
                "speedup_trimmed": x, "correct": True, "noisy": None, "strict_ok": True, "reduced_precision": False}

    tasks = [{"task": "L1/60_a", "eager_ms": 10.0}, {"task": "L1/24_b", "eager_ms": 0.01}]
    rows = [row("L1/60_a", c, x) for c in ("quiet", "busy") for x in (2.0, 2.07)]
    rows += [row("L1/24_b", c, x, mean=0.81 if (c, x) == ("quiet", 1.0) else None) for c in ("quiet", "busy")
             for x in (1.0, 1.002)]
    spread.table(rows, tasks, ("graphed",))
    assert ("graphed: 2 of 2 tasks within 1.05 quiet and busy (1 within 1.02 above 1 ms); on the reported speedup "
            "(the means' ratio) 1 of 2 within 1.05" in capsys.readouterr().out)


def test_a_fresh_machine_resumes_from_committed_rows(tmp_path, monkeypatch, capsys):
    # a GPU lease starts bare: --seed-rows puts the committed rows in OUT, so the reviews already made are skipped
    import gzip

    # --pair names the task after the kernel file (k.py: "k")
    rows = [{"task": "k", "condition": c, "protocol": "robust", "repeat": r, "speedup": 1.0,
             "speedup_trimmed": 1.0, "correct": True, "noisy": None, "strict_ok": True, "reduced_precision": False}
            for c in ("quiet", "busy") for r in range(3)]
    seed = tmp_path / "rows.jsonl.gz"
    with gzip.open(seed, "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    problem, kernel = tmp_path / "p.py", tmp_path / "k.py"
    problem.write_text("")
    kernel.write_text("")
    monkeypatch.setattr(spread, "one_review", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-reviewed")))
    monkeypatch.setattr(sys, "argv", ["timing_spread.py", "--pair", f"{problem}:{kernel}", "--out",
                                      str(tmp_path / "out"), "--protocols", "robust", "--seed-rows", str(seed)])
    assert spread.main() == 0
    out = capsys.readouterr().out
    assert "rows seeded from" in out and ": 6" in out
    assert len((tmp_path / "out" / "timing_spread.jsonl").read_text().splitlines()) == 6


def test_a_rows_judged_batch_says_whether_its_pace_confirmed_the_events_and_how_each_side_ran():
    # what tells an A/B of the graph batch apart in the table: confirmed or not, graph or eager on each side
    assert spread.judged({"judge_batch": None}) == ""
    row = {"judge_batch": {"confirmed": True, "graphs": {"reference": True, "candidate": False}}}
    assert spread.judged(row) == "confirmed, graphs g/e"
    assert spread.judged({"judge_batch": {"confirmed": False, "graphs": {}}}) == "unconfirmed, graphs -/-"
