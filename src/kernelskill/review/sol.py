"""The speed of light in a review: the problem's floor on the GPU the candidate was timed on, the share of it the
candidate reaches, and the one verdict it can give: a candidate faster than any implementation could be is rejected.

The problem's work is counted once per problem source (a child process runs the reference on PyTorch's meta
device, review/work.py); the floors come from review/roofline.py.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from kernelskill.problem import Problem
from kernelskill.review.results import Check, SpeedOfLight
from kernelskill.review.roofline import find_gpu, floor_ms, hard_floor_ms
from kernelskill.review.work import ProblemWork, measure_problem_work


def problem_work(problem: Problem) -> ProblemWork:
    """The problem's work, counted once per problem source in this process."""
    return _work(str(problem.path), hashlib.sha256(problem.source.encode()).hexdigest())


@functools.lru_cache(maxsize=512)
def _work(path: str, digest: str) -> ProblemWork:
    return measure_problem_work(path)


def count_ahead(problem_path: Path) -> None:
    """Count the problem's work now, into the cache the review's speed of light reads: an evaluator calls this
    before it takes a GPU, since the count is a child process of some seconds (importing torch) that would
    otherwise run at the end of the review, the GPU held and idle. A problem that cannot be read is left for the
    review to report."""
    from kernelskill.errors import KernelSkillError
    from kernelskill.problem import read_problem

    try:
        problem_work(read_problem(problem_path))
    except KernelSkillError:  # read_problem's ProblemError: missing, unreadable, not Python
        pass


def speed_of_light(work: ProblemWork, gpu: str | None, candidate_ms: float | None,
                   stored_output_bytes: int | None = None) -> SpeedOfLight:
    """`stored_output_bytes`: what the candidate's outputs occupied (the worker measures it); the hard floor counts
    the smaller of that and the reference's outputs, so an output that is a broadcast view of one value, which
    writes next to nothing, is not called impossible."""
    written = work.output_bytes
    if written is not None and stored_output_bytes is not None:
        written = min(written, float(stored_output_bytes))
    sol = SpeedOfLight(gpu=gpu, flops=work.flops, bytes=work.bytes, output_bytes=written,
                       precision=work.precision, note=work.note)
    if find_gpu(gpu) is None:
        sol.note = f"no peak figures for {gpu or 'this device'} (review/roofline.py lists H200, H100, A100)"
        return sol
    if work.flops is not None and work.bytes is not None and work.precision is not None:
        sol.sol_ms = floor_ms(work.flops, work.bytes, work.precision, gpu)
    if written is not None:
        sol.hard_floor_ms = hard_floor_ms(written, gpu)
    if sol.sol_ms and candidate_ms:
        sol.pct_of_sol = sol.sol_ms / candidate_ms * 100
    return sol


def assess(timing, problem: Problem, gpu: str | None, stored_output_bytes: int | None = None
           ) -> tuple[SpeedOfLight, Check | None, str | None]:
    """The speed of light of a review timed on a GPU: (the record, the check that rejects a candidate faster than
    the hard floor or None, the flag for one faster than the reference's floor or None). The verdict
    (review/verdict.py) applies them."""
    median = timing.candidate.median_ms
    sol = speed_of_light(problem_work(problem), gpu, median, stored_output_bytes)
    rejection = flag = None
    if sol.hard_floor_ms and median < sol.hard_floor_ms:
        rejection = Check(name="runtime:impossible-time", detail=(
            f"the candidate's median time {median * 1e3:.2f} us is below {sol.hard_floor_ms * 1e3:.2f} us, the "
            f"time {sol.gpu} needs to write its {sol.output_bytes / 1e6:.1f} MB of outputs at full DRAM "
            "bandwidth: no implementation is that fast, so its work escaped the clock"))
    if sol.sol_ms and median < sol.sol_ms:
        flag = (f"below_reference_floor: {sol.pct_of_sol:.0f}% of the floor of the reference's work: the candidate "
                "does less work than the reference's algorithm")
    return sol, rejection, flag
