"""scripts/batch_resolution.py: the fastest claim a judged batch would have confirmed, read back from a run."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from kernelskill.review.judge import ReferenceRun, bound_timing, fastest_confirmable
from kernelskill.review.results import TimingResult, TimingStats

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("batch_resolution", REPO / "scripts" / "batch_resolution.py")
batch_resolution = importlib.util.module_from_spec(spec)
spec.loader.exec_module(batch_resolution)


def _batch(claimed_ms: float, pace_ms: float, calls: int) -> dict:
    stats = TimingStats.from_samples([1.0] * 8)
    ref = ReferenceRun(folder=Path("."), trial_seeds=[], batch_seeds=list(range(calls)), stats=stats,
                       batch_walls={"prepare": 0.01, "calls": calls * 1e-3, "commit": 0.01})
    runner = TimingResult.of(stats, TimingStats.from_samples([claimed_ms] * 8), clock="cpu_perf_counter",
                             method="test", warmup=1, iters=8)
    walls = {"prepare": 0.01, "calls": calls * pace_ms / 1e3, "commit": 0.01}
    return bound_timing(runner, ref, walls, calls)[2].model_dump(mode="json")


def test_a_run_written_before_the_field_reads_as_the_judge_would_have_written_it(tmp_path, capsys, monkeypatch):
    short, long = _batch(0.06, 0.05, 10), _batch(0.2, 0.2, 2000)
    assert short["fastest_confirmable_us"] == 0.0 and long["fastest_confirmable_us"] > 200 / 1.5
    old = {k: v for k, v in long.items() if k != "fastest_confirmable_us"}
    # (a row without digests is from before the input file was masked: its prepare and commit could hide work)
    fastest_s, room_s = fastest_confirmable(long["candidate_pace_us"] / 1e6, 2000, long["reference_s"],
                                            long["candidate_s"], 1.0, movable=True)
    assert room_s > 0 and abs(batch_resolution.fastest_us(old) - fastest_s * 1e6) < 1e-3
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text("".join(json.dumps({"task": t, "judge_batch": b}) + "\n"
                               for t, b in (("short", short), ("long", long), ("old", old))))
    monkeypatch.setattr(sys, "argv", ["batch_resolution.py", str(reviews)])
    batch_resolution.main()
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("3 confirmed timings; 1 would have confirmed") and "1 any claim" in last, last
    # a batch of 1000 calls of 60 us, beside a prepare and a commit of 10 ms, was not enough (what they are
    # excused) before the input file was masked and the outputs digested; it is after
    before = {k: v for k, v in _batch(0.06, 0.06, 1000).items() if k != "fastest_confirmable_us"}
    assert batch_resolution.fastest_us(before) < 60 / 1.5
    assert batch_resolution.fastest_us({**before, "digests_checked": 64}) > 60 / 1.5
