"""Why a round failed reaches the console line of optimize and bench, not only run.db."""

from __future__ import annotations

import json

from rich.console import Console

from kernelskill.agents.context import ReviewFeedback
from kernelskill.bench.display import BenchDisplay
from kernelskill.bench.runner import BenchEvent
from kernelskill.loop.display import LiveDisplay
from kernelskill.loop.feedback import reason_of
from kernelskill.loop.optimize import OptimizeRequest, optimize
from kernelskill.loop.settings import LoopSettings
from kernelskill.report.results import TaskResult
from kernelskill.settings import ReviewSettings

from .helpers import PROBLEM, AgentScript, FakeEvaluator, features, kernel, plan


def test_failed_rounds_carry_their_reason_into_history_console_and_summary(tmp_path):
    client = AgentScript(generator=[kernel("compile_error"), kernel("correct", 1.0)], feature_extractor=[features()],
                         planner=[plan("kernel_fusion")], optimizer=[kernel("mismatch")])
    console = Console(record=True, width=300)
    request = OptimizeRequest(problem=PROBLEM, model="script:", out=tmp_path / "run",
                              loop=LoopSettings(seeds=2, rounds=1, profile="off", parallel_seeds=False),
                              review=ReviewSettings(device="cpu"))
    s = optimize(request, client=client, evaluator=FakeEvaluator(), on_event=LiveDisplay(console))
    reasons = {(r.round, r.slot): r.reason for r in s.history}
    assert reasons == {(0, 1): "kernel.py:3: error: expected ';'", (0, 2): "",
                       (1, 0): "mismatch: max abs error 0.5 at [0, 3]"}
    out = console.export_text()
    assert "compile_error" in out and "kernel.py:3: error: expected ';'" in out
    assert "mismatch: max abs error 0.5 at [0, 3]" in out  # brackets printed as text, not eaten as markup
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["history"][-1]["reason"] == "mismatch: max abs error 0.5 at [0, 3]"


def test_reason_names_the_check_that_fired_and_keeps_to_two_lines():
    rejected = ReviewFeedback(correct=False, stage="verify", error_kind="rejected",
                              error="the candidate replaced torch.allclose",
                              checks=["runtime:integrity: torch.allclose was replaced"])
    assert reason_of(rejected) == "check runtime:integrity: the candidate replaced torch.allclose"
    compiled = ReviewFeedback(correct=False, stage="compile", error_kind="compile_error",
                              error="\nkernel.cu(12): error: identifier \"x\" is undefined\n  int y = x;\n\n3 errors")
    assert reason_of(compiled) == 'kernel.cu(12): error: identifier "x" is undefined | int y = x;'
    assert len(reason_of(compiled.model_copy(update={"error": "e" * 1000}))) == 200
    assert reason_of(ReviewFeedback(correct=True, stage=None)) == ""


def test_bench_task_line_says_why_its_last_kernel_failed():
    console = Console(record=True, width=300)
    display = BenchDisplay(console)
    result = TaskResult(name="1_x", level="1", index=1, problem="p.py", status="finished", success=False,
                        best_speedup=None, history=[
                            {"round": 0, "branch": "seed", "verdict": "compile_error", "reason": "a [1] b"},
                            {"round": 1, "branch": "repair", "verdict": "mismatch", "reason": "max abs 0.5"}])
    display(BenchEvent(kind="task_done", task="1_x", result=result))
    assert "no correct kernel (last: max abs 0.5)" in console.export_text()


def test_a_raising_candidates_reason_names_its_exception():
    # the example's second seed: before, the line showed where it raised and dropped the AttributeError itself
    raised = ReviewFeedback(correct=False, stage="verify", error_kind="runtime_error", error=(
        "the candidate raised on its first run:\n"
        "  kernels/gelu_chain/seed-2.py:23 in forward: fused_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)\n"
        "InterpreterError: AttributeError(\"module 'triton.language' has no attribute 'gelu'\")"))
    assert reason_of(raised) == ("the candidate raised on its first run: | InterpreterError: AttributeError(\"module "
                                 "'triton.language' has no attribute 'gelu'\")")
    dotted = raised.model_copy(update={"error": "raised:\n  at x.py:3\n  at y.py:4\n"
                                                "triton.compiler.errors.CompilationError: at 1:2: bad"})
    assert reason_of(dotted) == "raised: | triton.compiler.errors.CompilationError: at 1:2: bad"


def test_the_agents_are_not_told_of_the_judges_own_limits():
    # timing_unresolved says the judge's batch could not test the runner's claimed time: true of the review, and
    # kept there, but nothing the kernel's author can act on; the other flags reach the agents as they are
    from kernelskill.loop.feedback import review_feedback
    from kernelskill.review.results import ReviewResult

    flags = ["timing_unresolved: the judge's batch of 10 calls took 1.46 ms", "timing_unconfirmed: 87 us against 3.5",
             "reference_slowed: beside the candidate"]
    result = ReviewResult(compiled=True, correct=True, stage=None, error=None, flags=flags, device="cpu",
                          backend="triton", problem="p.py", candidate="k.py")
    assert review_feedback(result).flags == flags[1:]
    assert result.flags == flags
