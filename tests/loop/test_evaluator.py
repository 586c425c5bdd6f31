"""Where an evaluation runs (loop/evaluator.py): what an evaluator does before it takes a device."""

from __future__ import annotations

from pathlib import Path

from kernelskill.candidate import read_candidate
from kernelskill.loop.evaluator import PooledEvaluator
from kernelskill.problem import read_problem
from kernelskill.review import sol
from kernelskill.review.results import ReviewResult
from kernelskill.review.work import ProblemWork
from kernelskill.settings import ReviewSettings
from tests.conftest import DATA

PROBLEM = DATA / "problems" / "p01_pointwise_gelu_chain.py"
CANDIDATE = DATA / "candidates" / "p01_pointwise_gelu_chain" / "triton_ok.py"


def test_the_problem_work_is_counted_before_the_gpu_is_taken(monkeypatch, tmp_path):
    # Counting a problem's work (the speed of light) is a child process importing torch, seconds on the H200
    # machine; counted inside the review it kept the GPU held and idle for each new task of a bench
    events = []
    sol._work.cache_clear()
    monkeypatch.setattr(sol, "measure_problem_work", lambda path: events.append(("count", Path(path).name))
                        or ProblemWork(source="test"))

    def reviewer(problem, candidate, settings, log_dir=None, env=None):
        events.append(("review", env))
        sol.problem_work(read_problem(problem))  # what the review's speed of light reads
        return ReviewResult(device="cuda", backend="triton", problem=str(problem), candidate="c.py", compiled=True,
                            correct=True, stage=None, error=None, settings={})

    evaluator = PooledEvaluator("cuda", ["0"], reviewer=reviewer)
    candidate = read_candidate(CANDIDATE)
    for _ in range(2):
        evaluator.review(PROBLEM, candidate, ReviewSettings(), tmp_path)
    # counted once, before the first review took GPU 0; the review's own lookup is a cache hit
    assert events == [("count", PROBLEM.name), ("review", {"CUDA_VISIBLE_DEVICES": "0"}),
                      ("review", {"CUDA_VISIBLE_DEVICES": "0"})]
    sol._work.cache_clear()


def test_a_problem_that_cannot_be_read_is_left_for_the_review_to_report(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("def get_inputs(:\n")
    sol.count_ahead(bad)  # no exception: the review says what is wrong with the file
    sol.count_ahead(tmp_path / "missing.py")


def test_a_review_that_gives_the_device_back_lets_the_next_one_start_before_it_ends(monkeypatch, tmp_path):
    # the judge's last steps (the picked outputs compared, the verdict composed) are host work on files: a bench's
    # next review may take the GPU meanwhile. One GPU, two reviews on two threads: the second starts while the
    # first, having given the device back, still runs
    import threading

    monkeypatch.setattr(sol, "count_ahead", lambda path: None)
    second_started = threading.Event()
    order = []

    def reviewer(problem, candidate, settings, log_dir=None, env=None, release=None):
        first = not order
        order.append("start")
        if first:
            release()
            assert second_started.wait(10), "the second review never got the device the first gave back"
            release()  # a second call gives nothing back twice
        else:
            second_started.set()
        order.append("end")
        return ReviewResult(device="cuda", backend="triton", problem=str(problem), candidate="c.py", compiled=True,
                            correct=True, stage=None, error=None, settings={})

    evaluator = PooledEvaluator("cuda", ["0"], reviewer=reviewer)
    evaluator._gives_back = True  # as with the Reviewer's own review()
    candidate = read_candidate(CANDIDATE)
    threads = [threading.Thread(target=evaluator.review, args=(PROBLEM, candidate, ReviewSettings(), tmp_path))
               for _ in range(2)]
    threads[0].start()
    while not order:
        pass
    threads[1].start()
    for t in threads:
        t.join(20)
    assert order == ["start", "start", "end", "end"], order
    assert evaluator._devices._free.qsize() == 1  # the device was given back once, not once per call


def _result(correct: bool, error: str | None = None) -> ReviewResult:
    return ReviewResult(device="cuda", backend="triton", problem="p.py", candidate="c.py", compiled=True,
                        correct=correct, stage=None if correct else "verify", error=error, settings={})


def test_a_shared_gpu_holds_several_reviews_at_once(monkeypatch, tmp_path):
    # with --reviews-per-gpu 2, two reviews are on GPU 0 together, each with its turn (review/turns.py)
    import threading

    monkeypatch.setattr(sol, "count_ahead", lambda path: None)
    inside, both = [], threading.Barrier(2, timeout=10)

    def reviewer(problem, candidate, settings, log_dir=None, env=None, release=None, turn=None):
        inside.append(turn)
        both.wait()  # raises BrokenBarrierError when the second never gets in
        return _result(True)

    evaluator = PooledEvaluator("cuda", ["0"], share=2, reviewer=reviewer)
    evaluator._gives_back = True
    assert evaluator.slots == 2
    threads = [threading.Thread(target=evaluator.review, args=(PROBLEM, read_candidate(CANDIDATE), ReviewSettings(),
                                                               tmp_path)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert len(inside) == 2 and all(t is not None for t in inside) and inside[0] is not inside[1]


def test_a_review_out_of_memory_beside_others_is_reviewed_again_alone(monkeypatch, tmp_path):
    # another review's tensors may be what filled the GPU: the candidate is owed a review with the device alone
    monkeypatch.setattr(sol, "count_ahead", lambda path: None)
    alone = []

    def reviewer(problem, candidate, settings, log_dir=None, env=None, release=None, turn=None):
        alone.append(turn._whole)
        if not turn._whole:
            return _result(False, "runtime_error: CUDA out of memory. Tried to allocate 4.00 GiB")
        return _result(True)

    evaluator = PooledEvaluator("cuda", ["0"], share=2, reviewer=reviewer)
    evaluator._gives_back = True
    result = evaluator.review(PROBLEM, read_candidate(CANDIDATE), ReviewSettings(), tmp_path)
    assert result.correct and alone == [False, True]
    assert any(f.startswith("reviewed_alone") for f in result.flags)


def test_a_review_that_fails_otherwise_is_not_reviewed_again(monkeypatch, tmp_path):
    monkeypatch.setattr(sol, "count_ahead", lambda path: None)
    calls = []

    def reviewer(problem, candidate, settings, log_dir=None, env=None, release=None, turn=None):
        calls.append(turn)
        return _result(False, "mismatch: max abs error 3.1")

    evaluator = PooledEvaluator("cuda", ["0"], share=2, reviewer=reviewer)
    evaluator._gives_back = True
    assert not evaluator.review(PROBLEM, read_candidate(CANDIDATE), ReviewSettings(), tmp_path).correct
    assert len(calls) == 1
