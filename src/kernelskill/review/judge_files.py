"""The judge's comparison of the two runners' output files (judge.py): read once each, straight to the device the
judge compares on, and compared there."""

from __future__ import annotations

import os
from pathlib import Path

from kernelskill.review.compare import compare_outputs
from kernelskill.review.exchange import BATCH_OUTPUTS, MAX_TENSORS, ExchangeError, digest, read_outputs, read_outputs_on
from kernelskill.review.results import Mismatch
from kernelskill.review.worker.checks import map_tensors


def comparing_device(device: str, env: dict[str, str] | None) -> str:
    """Where this process compares a review's outputs: the review's own GPU when this process sees it (comparing
    outputs of a GB took the host 6 s each on the H100, a hundredth of that on the GPU), else the CPU. This process
    never runs problem or candidate code, so its GPU work is the judge's own; it happens while the review holds
    the device, before the device is given back."""
    if device != "cuda":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    wanted = (env or {}).get("CUDA_VISIBLE_DEVICES")
    if wanted is None:
        return "cuda:0"  # the runners see what this process sees, and use its first device
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return f"cuda:{wanted}" if wanted.isdigit() and int(wanted) < torch.cuda.device_count() else "cpu"
    listed = [v.strip() for v in visible.split(",")]
    return f"cuda:{listed.index(wanted)}" if wanted in listed else "cpu"


def _compare(expected, got, atol: float, rtol: float, n: int, on: str):
    """compare_outputs on device `on` (the CPU when the device cannot hold or compare them)."""
    if on != "cpu":
        import torch

        try:
            moved = [map_tensors(v, lambda t: t.to(on)) for v in (expected, got)]
            return compare_outputs(moved[0], moved[1], atol, rtol, n)
        except RuntimeError:  # out of memory, a dtype the device does not compare: the host can
            pass
        finally:
            moved = None
            torch.cuda.empty_cache()  # nothing of the judge's stays on the device the next review times
    return compare_outputs(expected, got, atol, rtol, n)


def _compare_files(ref_dir: Path, cand_dir: Path, indices: list[int], atol: float, rtol: float,
                   max_bytes: int, batch_of: tuple[int, int] | None = None, on: str = "cpu"
                   ) -> tuple[bool, str | None, Mismatch | None, float, float]:
    """(ok, why not, mismatch, max abs, max rel) over the outputs of these calls: a file each (the trials), or
    entries of each side's batch file, each file read once (`batch_of`: the calls the reference's and the
    candidate's batch held), compared on device `on` (comparing_device), where the files' tensors are read straight
    to (exchange.read_outputs_on)."""
    worst_abs = worst_rel = 0.0
    try:
        if batch_of is not None:
            try:
                expected_all = read_outputs_on(on, ref_dir / BATCH_OUTPUTS, 1 << 62, indices, MAX_TENSORS * batch_of[0])
            except ExchangeError as exc:
                raise RuntimeError(f"the reference runner's outputs could not be read: {exc}") from None
            try:
                got_all = read_outputs_on(on, cand_dir / BATCH_OUTPUTS, max_bytes * batch_of[1], indices,
                                  MAX_TENSORS * batch_of[1])
            except ExchangeError as exc:
                return False, f"the batch's outputs: {exc}", None, worst_abs, worst_rel
        for n, i in enumerate(indices):
            if batch_of is not None:
                expected, got = expected_all[n], got_all[n]
            else:
                try:
                    expected = read_outputs_on(on, ref_dir / f"{i}.out", 1 << 62)
                except ExchangeError as exc:
                    raise RuntimeError(f"the reference runner's outputs could not be read: {exc}") from None
                try:
                    got = read_outputs_on(on, cand_dir / f"{i}.out", max_bytes)
                except ExchangeError as exc:
                    return False, f"call {n + 1}: {exc}", None, worst_abs, worst_rel
            cmp = _compare(expected, got, atol, rtol, n, on)
            expected = got = None
            worst_abs, worst_rel = max(worst_abs, cmp.max_abs_error), max(worst_rel, cmp.max_rel_error)
            if not cmp.ok:
                return False, cmp.mismatch.reason, cmp.mismatch, worst_abs, worst_rel
        return True, None, None, worst_abs, worst_rel
    finally:
        expected_all = got_all = expected = got = None
        if on != "cpu":
            import torch

            torch.cuda.empty_cache()  # nothing of the judge's stays on the device the next review times


def check_digests(folder: Path, said, indices: list[int], max_bytes: int, calls: int) -> str | None:
    """Why the outputs a runner wrote for these calls of its batch (folder/BATCH_OUTPUTS) are not those its `calls`
    part ended with, by the digests it `said` then (exchange.digest); None when they are. Read on the host: the
    device may serve the next review meanwhile."""
    if not isinstance(said, list) or len(said) != calls or not all(type(d) is int for d in said):
        return f"the runner did not say the digests of its {calls} calls' outputs"
    step = max(1, (256 << 20) * calls // max(1, max_bytes))  # calls read at once: at most ~256 MB on the host
    for group in (indices[k:k + step] for k in range(0, len(indices), step)):
        try:
            written = read_outputs(folder / BATCH_OUTPUTS, max_bytes, group, MAX_TENSORS * calls)
        except ExchangeError as exc:
            return f"its outputs: {exc}"
        for i, value in zip(group, written):
            if digest(value) != said[i]:
                return (f"the outputs written for call {i + 1} of {calls} are not those its calls made (digest "
                        f"{digest(value)}, said at the end of the calls {said[i]})")
    return None
