"""The judge's comparison of the two runners' output files (judge.py): read once each, straight to the device the
judge compares on, and compared there."""

from __future__ import annotations

import math
import os
from pathlib import Path

from kernelskill.review.compare import compare_outputs, flatten_outputs
from kernelskill.review.exchange import (BATCH_OUTPUTS, MAX_TENSORS, ExchangeError, digest, read_outputs,
                                         read_outputs_on, read_samples)
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
                return False, told(cmp.mismatch), cmp.mismatch, worst_abs, worst_rel
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


def compare_samples(ref_dir: Path, cand_dir: Path, indices: list[int], atol: float, rtol: float, max_bytes: int,
                    batch_of: tuple[int, int], per_tensor: int) -> tuple[str | None, Mismatch | None]:
    """(why not, mismatch) for these calls of the two runners' batch files, compared at `per_tensor` positions of
    each output tensor (all of a smaller one), drawn here from a secret seed after both files were written; (None,
    None) when every sampled element is within tolerance. Cheap on the host whatever the batch's size: calls whose
    whole outputs are not compared are still held to the reference, so a call that skipped its work is caught
    unless its output happens to agree at positions it could not know."""
    import secrets

    import numpy as np
    import torch

    draw = np.random.default_rng(secrets.randbits(128))
    chosen: dict[tuple[int, int], tuple[str, list[int], object]] = {}

    def pick(call: int, k: int, dtype, shape: list[int]):
        n = math.prod(shape)
        positions = np.arange(n, dtype=np.int64) if n <= per_tensor else np.sort(draw.integers(0, n, per_tensor))
        chosen[call, k] = (str(dtype), shape, positions)
        return positions

    def same(call: int, k: int, dtype, shape: list[int]):
        mine = chosen.get((call, k))
        return mine[2] if mine is not None and mine[:2] == (str(dtype), shape) else None

    try:
        expected = read_samples(ref_dir / BATCH_OUTPUTS, 1 << 62, indices, MAX_TENSORS * batch_of[0], pick)
    except ExchangeError as exc:
        raise RuntimeError(f"the reference runner's outputs could not be read: {exc}") from None
    try:
        got = read_samples(cand_dir / BATCH_OUTPUTS, max_bytes * batch_of[1], indices, MAX_TENSORS * batch_of[1], same)
    except ExchangeError as exc:
        return f"the batch's outputs: {exc}", None
    for call, (_, ref_shapes), (_, cand_shapes) in zip(indices, expected, got):
        if cand_shapes != ref_shapes:
            return (f"call {call + 1}'s outputs are {_described(cand_shapes)}, the reference's "
                    f"{_described(ref_shapes)}"), None
    if _at_once(expected, got, atol, rtol):
        return None, None
    for call, (ref_value, _), (cand_value, _) in zip(indices, expected, got):  # which call, and where
        cmp = compare_outputs(ref_value, cand_value, atol, rtol, call)
        if not cmp.ok:
            m = cmp.mismatch
            flat = flatten_outputs(ref_value)[:(m.output_index or 0) + 1]
            if not m.first_indices or not isinstance(flat[-1], torch.Tensor):
                return f"call {call + 1}: {told(m)}", m
            _, shape, positions = chosen[call, sum(isinstance(v, torch.Tensor) for v in flat) - 1]
            where = [[int(j) for j in np.unravel_index(int(positions[i[0]]), shape)] for i in m.first_indices]
            m = m.model_copy(update={"first_indices": where, "total": math.prod(shape), "mismatched": None,
                                     "reason": f"call {call + 1}, at {len(positions)} sampled positions: {m.reason}"})
            return told(m), m
    return None, None


def told(m: Mismatch, first: int = 3) -> str:
    """A mismatch's reason with its first wrong elements' values, as the judge's error says it (the runner's own
    trials show theirs in the review's verify record; the judge's are in its message alone)."""
    values = "; ".join(f"at {tuple(i)} got {g:.6g}, expected {e:.6g}"
                       for i, g, e in list(zip(m.first_indices, m.got, m.expected))[:first])
    return f"{m.reason} ({values})" if values else m.reason


def _at_once(expected: list, got: list, atol: float, rtol: float) -> bool:
    """Whether every call's sampled outputs are within tolerance, compared in one pass: each output position's
    samples of all calls joined (calls of one structure, as a batch's are; otherwise False, and the caller compares
    call by call)."""
    import torch

    if not expected or any(shapes != expected[0][1] for _, shapes in expected):
        return False
    refs, cands = [flatten_outputs(v) for v, _ in expected], [flatten_outputs(v) for v, _ in got]
    if any(len(r) != len(refs[0]) or len(c) != len(r) for r, c in zip(refs, cands)):
        return False
    joined: tuple[list, list] = ([], [])
    for k in range(len(refs[0])):
        for side, values in zip(joined, (refs, cands)):
            column = [v[k] for v in values]
            side.append(torch.cat(column) if all(isinstance(v, torch.Tensor) for v in column) else tuple(column))
    return compare_outputs(tuple(joined[0]), tuple(joined[1]), atol, rtol, 0).ok


def _described(shapes: list[tuple[str, list[int]]]) -> str:
    return ", ".join(f"{dtype} {tuple(shape)}" for dtype, shape in shapes) or "no tensors"
