"""The best kernel is picked on one rule (loop/outcome.py compare_ms): the summary's full-precision best agrees with
the loop's promotion, also when a few disturbed samples make the mean say otherwise."""

from __future__ import annotations

from kernelskill.agents.context import ReviewFeedback
from kernelskill.loop.outcome import compare_ms, full_precision_best
from kernelskill.loop.state import KernelRef


def _review(mean_ms: float, trimmed_ms: float | None, flags: tuple[str, ...] = ()) -> dict:
    timing = {"candidate": {"trimmed_mean_ms": trimmed_ms}} if trimmed_ms is not None else None
    return {"correct": True, "compiled": True, "candidate_ms": mean_ms, "flags": list(flags), "timing": timing,
            "precision": {"computes_in": "fp32"}}


def test_the_summary_picks_the_kernel_the_loop_would_promote(store, task):
    _, task_id = task
    noisy = store.add_candidate(task_id, None, "noisy", "src", origin="seed")  # one stalled sample lifts its mean
    steady = store.add_candidate(task_id, None, "steady", "src", origin="seed")
    store.add_review(noisy.id, _review(mean_ms=1.30, trimmed_ms=0.90))
    store.add_review(steady.id, _review(mean_ms=1.00, trimmed_ms=1.00))
    assert full_precision_best(store, task_id) == (1.30, True)  # the noisy kernel, reported at its mean

    refs = [KernelRef(candidate_id=c, label=label, path="k.py", source="", ms=mean, robust_ms=trimmed,
                      feedback=ReviewFeedback(correct=True))
            for c, label, mean, trimmed in ((noisy.id, "noisy", 1.30, 0.90), (steady.id, "steady", 1.00, 1.00))]
    assert min(refs, key=lambda r: r.compare_ms).label == "noisy"


def test_reduced_precision_kernels_and_untrimmed_reviews(store, task):
    _, task_id = task
    fp16 = store.add_candidate(task_id, None, "fp16", "src", origin="seed")
    old = store.add_candidate(task_id, None, "old", "src", origin="seed")  # reviewed before trimmed means existed
    store.add_review(fp16.id, _review(0.5, 0.5, flags=("reduced_precision",)))
    store.add_review(old.id, _review(0.8, None))
    assert full_precision_best(store, task_id) == (0.8, True)
    assert compare_ms(0.8, None) == 0.8 and compare_ms(0.8, 0.7) == 0.7
