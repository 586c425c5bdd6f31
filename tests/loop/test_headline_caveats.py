"""A headline speedup with a doubt says so beside it: on the console, in --json / summary.json, in results.json."""

from __future__ import annotations

import json

from rich.console import Console

from kernelskill.loop.display import print_summary
from kernelskill.loop.optimize import OptimizeRequest, optimize
from kernelskill.loop.settings import LoopSettings
from kernelskill.settings import ReviewSettings
from kernelskill.loop.outcome import TaskOutcome

from .helpers import PROBLEM, AgentScript, FakeEvaluator, kernel


def test_caveats_name_noisy_timing_reduced_precision_and_qualifying_flags():
    o = TaskOutcome(success=True, best_speedup=1.55, timing_noisy="reference relative MAD 103% > 15%",
                    best_reduced_precision=True,
                    flags=["noisy_timing: reference relative MAD 103% > 15%", "host_bound: the candidate's host ...",
                           "degenerate_reference:constant", "timing_retimed: kept the second"])
    assert o.speedup_caveats == ["noisy timing (reference relative MAD 103% > 15%)",
                                 "reduced precision (passes only the configured tolerance)", "host_bound",
                                 "degenerate_reference:constant"]
    assert TaskOutcome(success=True, best_speedup=2.0).speedup_caveats == []
    assert TaskOutcome(success=False, best_speedup=None, timing_noisy="x").speedup_caveats == []


def test_a_reduced_precision_best_is_flagged_beside_the_headline_and_in_the_json(tmp_path):
    request = OptimizeRequest(problem=PROBLEM, model="script:", out=tmp_path / "run",
                              loop=LoopSettings(seeds=1, rounds=0, profile="off", parallel_seeds=False),
                              review=ReviewSettings(device="cpu"))
    s = optimize(request, client=AgentScript(generator=[kernel("correct", 1.55, reduced=True)]),
                 evaluator=FakeEvaluator())
    console = Console(record=True, width=300)
    print_summary(s, console)
    headline = console.export_text().splitlines()[0]
    # before: "best kernel: seed-1, 1.55x vs PyTorch eager" and nothing beside it
    assert "1.55x vs PyTorch eager" in headline and "reduced precision" in headline
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["speedup_caveats"] == ["reduced precision (passes only the configured tolerance)"]
    assert json.loads(s.model_dump_json())["speedup_caveats"] == saved["speedup_caveats"]


def test_a_figure_the_judge_could_not_test_says_so_beside_it():
    # the judge's batch could not tell the runner's claimed time from one 1.5x smaller: the figure rests on the
    # runner's events, which a reader of the headline must know
    flag = "timing_unresolved: the judge's batch of 10 calls took 1.46 ms by its clock, against 1 ms allowed ..."
    o = TaskOutcome(success=True, best_speedup=43.7, flags=[flag, "timing_retimed: kept the second"])
    assert o.speedup_caveats == ["timing_unresolved"]
