"""What the stages compare and record, apart from running anything: the problem a request names, outputs mapped and
compared, a reference that is degenerate, a timed output at the tolerance's edge, the verify record."""

from __future__ import annotations

from pathlib import Path

from kernelskill.review.results import VerifyResult
from kernelskill.review.wire import ReviewRequest


def problem_of(request: ReviewRequest):
    """The problem a request names, from the source the caller read (the worker does not read the file again)."""
    from kernelskill.problem import Problem

    path = Path(request.problem_path)
    return Problem(path=path, source=request.problem_source, name=path.stem)


MARGINAL_FRACTION = 1e-3  # at most this share of a timed output's elements outside the tolerance: not a stale result


def marginal(cmp) -> bool:
    m = cmp.mismatch
    return (m is not None and m.mismatched <= MARGINAL_FRACTION * m.total
            and cmp.max_abs_error != float("inf") and cmp.max_abs_error == cmp.max_abs_error)


def map_tensors(out, fn):
    import torch

    if isinstance(out, torch.Tensor):
        return fn(out)
    if isinstance(out, (tuple, list)):
        return type(out)(map_tensors(o, fn) for o in out)
    return out


def changed(before: list, after: list) -> bool:
    import torch

    for a, b in zip(before, after):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.data_ptr() != b.data_ptr():
            if a.shape != b.shape or not torch.equal(a, b):
                return True
    return False


def verify_record(ok, trials, passed, settings, max_abs, max_rel, mismatch, distributions=(),
                  skipped=None, failed=None) -> VerifyResult:
    return VerifyResult(ok=ok, trials=trials, passed=passed, atol=settings.atol, rtol=settings.rtol,
                        max_abs_error=max_abs, max_rel_error=max_rel, mismatch=mismatch,
                        distributions=list(distributions), skipped_distributions=skipped or {},
                        failed_distributions=failed or {})


def degenerate(ref_outputs: list, atol: float, torch) -> set[str]:
    """Flags for a reference whose output is (near) zero, constant, or the same for every input."""
    from kernelskill.review.compare import flatten_outputs

    trials = [[t.double() for t in flatten_outputs(o) if isinstance(t, torch.Tensor) and t.numel()] for o in ref_outputs]
    tensors = [t for trial in trials for t in trial]
    if not tensors:
        return set()
    flags = set()
    if all(float(t.abs().max()) <= atol for t in tensors):
        flags.add("degenerate_reference:near_zero")
    elif all(float(t.max() - t.min()) <= atol for t in tensors):
        flags.add("degenerate_reference:constant")
    elif len(trials) > 1 and all(
        len(trial) == len(trials[0]) and all(a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=0) for a, b in zip(trial, trials[0]))
        for trial in trials[1:]
    ):
        flags.add("degenerate_reference:input_independent")
    return flags
