"""scripts/compare_harnesses.py on a run whose folder is gone: its results.json stands in for run.db, pending tasks
are left out, and a later results.json replaces an earlier one's tasks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _task(name: str, status: str, correct: bool, verdict: str, reason: str = "") -> dict:
    return {"name": name, "level": 3, "status": status, "success_kernelbench": correct, "success_strict": False,
            "verdict": verdict, "flags": ["static:try-fallback"] if correct else [],
            "best_speedup": 2.0 if correct else None,
            "history": [{"verdict": verdict, "reason": reason}] if status == "finished" else []}


def _kb(name: str, correct: bool) -> dict:
    return {"key": f"L3/{name}", "phase": "eval", "compiled": True, "correctness": correct, "speedup": 1.0}


def test_results_json_runs_are_compared_and_a_later_one_replaces_an_earlier(tmp_path):
    first = tmp_path / "first.json"
    first.write_text(json.dumps({"tasks": [
        _task("35_LTSM", "finished", False, "mismatch", "trial 1 of 7: NaN"),
        _task("36_X", "finished", True, "correct"),
        _task("37_Y", "pending", False, "pending")]}))
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"tasks": [_task("35_LTSM", "finished", True, "correct")]}))
    kb = tmp_path / "kb.jsonl"
    kb.write_text("\n".join(json.dumps(_kb(n, c)) for n, c in [("35_LTSM", True), ("36_X", True), ("37_Y", True)]))

    def compare(*runs: Path) -> dict:
        out = tmp_path / "out.json"
        args = [a for r in runs for a in ("--run", str(r))]
        subprocess.run([sys.executable, str(REPO / "scripts" / "compare_harnesses.py"), *args, "--kb", str(kb),
                        "--json", str(out)], check=True, capture_output=True, text=True)
        return json.loads(out.read_text())

    alone = compare(first)
    assert alone["levels"]["L3"]["tasks"] == 2  # the pending task has no review to compare
    assert alone["levels"]["L3"]["agree_on_kb_correct"] == 1
    assert [d["task"] for d in alone["disagreements"]] == ["L3/35_LTSM"]
    assert alone["disagreements"][0]["error"] == "trial 1 of 7: NaN"

    both = compare(first, later)
    assert both["levels"]["L3"]["agree_on_kb_correct"] == 2 and both["disagreements"] == []
