"""Comparing candidate outputs with reference outputs: structure, shape, dtype, values, NaN/Inf."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernelskill.review.results import Mismatch


def flatten_outputs(out) -> list:
    """A forward's outputs as a flat list (a tensor, or a tuple/list of them, possibly nested)."""
    if isinstance(out, (tuple, list)):
        items = []
        for o in out:
            items.extend(flatten_outputs(o))
        return items
    return [out]


@dataclass
class Comparison:
    ok: bool
    max_abs_error: float
    max_rel_error: float
    mismatch: Mismatch | None = None
    strict_bad: int = 0  # elements outside the `strict` tolerance, when one was given


CHUNK = 1 << 24  # elements compared at a time: the float64 temporaries stay near 1 GB however large an output is


@dataclass
class _Values:
    bad: int = 0  # elements outside the tolerance
    abs_err: float = 0.0
    rel_err: float = 0.0
    nonfinite: bool = False  # a NaN or Inf where the reference has none
    first: list[int] | None = None  # flat indices of the first few bad elements
    strict_bad: int = 0


NARROW = (torch.float32, torch.float16, torch.bfloat16)  # compared in float32 first (exact in it)
MARGIN = 1e-5  # "surely within the tolerance" leaves this share of it for float32's rounding (at most ~3e-7)
TINY_REF = 1e-30  # below this a reference value's relative error is left to the float64 pass (float32 range)


def _surely_close(cc: torch.Tensor, rc: torch.Tensor, tolerances: list[tuple[float, float]]):
    """(mask, |c - r|, |c - r| / |r|) in float32: the mask holds the elements within every (atol, rtol) by more than
    float32's rounding can change, finite, with a reference either zero or of a size whose relative error float32
    represents. Every other element goes through the float64 comparison, so no verdict depends on this pass."""
    c32, r32 = cc.float(), rc.float()
    diff = (c32 - r32).abs()
    ref = r32.abs()
    sure = torch.isfinite(diff) & ((ref >= TINY_REF) | (r32 == 0))  # a NaN or Inf on either side: float64's call
    for atol, rtol in tolerances:
        sure &= diff <= (atol + rtol * ref) * (1 - MARGIN)
    return sure, diff, diff / ref.clamp_min(TINY_REF)


def _compare_values(r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float, limit: int = 5,
                    strict: tuple[float, float] | None = None) -> _Values:
    """Element-wise comparison of two tensors of one shape, a chunk at a time (a 1e9-element output would need
    tens of GB of float64 temporaries at once, and boolean indexing of it far more). Floating outputs of 32 bits or
    fewer are first compared in float32, and only the elements that pass cannot tell surely go through float64:
    the verdict is float64's (torch.isclose) element by element; a reported largest error may differ from float64's
    in its last float32 digit."""
    rf, cf = r.detach().reshape(-1), c.detach().reshape(-1)
    out = _Values(first=[])
    tolerances = [(atol, rtol)] + ([strict] if strict is not None else [])
    for start in range(0, cf.numel(), CHUNK):
        cc = cf[start:start + CHUNK]
        rc = rf[start:start + CHUNK].to(cc.device)
        index = None  # the chunk's elements the float64 pass takes (None: all of them)
        if r.dtype in NARROW and c.dtype == r.dtype and cc.numel():
            sure, diff, rel = _surely_close(cc, rc, tolerances)
            if bool(sure.any()):
                out.abs_err = max(out.abs_err, float(torch.where(sure, diff, 0.0).max()))
                out.rel_err = max(out.rel_err, float(torch.where(sure & (rc != 0), rel, 0.0).max()))
            if bool(sure.all()):
                continue
            index = (~sure).nonzero()[:, 0]
            cc, rc = cc[index], rc[index]
        _exact(out, cc, rc, r.dtype, atol, rtol, strict, limit, start, index)
    return out


def _exact(out: _Values, cc: torch.Tensor, rc: torch.Tensor, dtype, atol: float, rtol: float,
           strict: tuple[float, float] | None, limit: int, start: int, index: torch.Tensor | None) -> None:
    """The float64 comparison of these elements, folded into `out`; `index` maps them back into the chunk."""
    tiny = torch.finfo(torch.float64).tiny
    if dtype == torch.bool:
        bad = cc != rc
        diff = rel = bad.to(torch.float64)
        nonzero_ref = rc
        strict_bad = bad
    else:
        c64, r64 = cc.to(torch.float64), rc.to(torch.float64)
        # NaN matches NaN and Inf matches Inf of the same sign; anything else non-finite fails
        bad = ~torch.isclose(c64, r64, rtol=rtol, atol=atol, equal_nan=True)
        if strict is not None:
            strict_bad = ~torch.isclose(c64, r64, rtol=strict[1], atol=strict[0], equal_nan=True)
        diff = (c64 - r64).abs()
        rel = diff / r64.abs().clamp_min(tiny)
        nonzero_ref = r64 != 0
    if not cc.numel():
        return
    finite = torch.isfinite(diff)
    out.abs_err = max(out.abs_err, float(torch.where(finite, diff, 0.0).max()))
    out.rel_err = max(out.rel_err, float(torch.where(finite & nonzero_ref, rel, 0.0).max()))
    out.nonfinite = out.nonfinite or bool((bad & ~finite).any())
    if strict is not None:
        out.strict_bad += int(strict_bad.sum())
    n = int(bad.sum())
    if n:
        out.bad += n
        if len(out.first) < limit:
            found = bad.nonzero()[:limit - len(out.first), 0]
            if index is not None:
                found = index[found]
            out.first += [start + int(i) for i in found.tolist()]


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return index[::-1]


def compare_outputs(ref_out, cand_out, atol: float, rtol: float, trial: int,
                    strict: tuple[float, float] | None = None) -> Comparison:
    """Compare every returned tensor. NaN/Inf in the candidate where the reference has none fails. With `strict`
    (atol, rtol), the same pass also counts the elements outside that tolerance."""
    refs, cands = flatten_outputs(ref_out), flatten_outputs(cand_out)
    if len(refs) != len(cands):
        return Comparison(False, float("inf"), float("inf"), Mismatch(
            trial=trial, reason=f"returned {len(cands)} output(s), the reference returns {len(refs)}"))
    worst_abs = worst_rel = 0.0
    strict_bad = 0
    for i, (r, c) in enumerate(zip(refs, cands)):
        if not isinstance(r, torch.Tensor):
            if r != c:
                return Comparison(False, float("inf"), float("inf"), Mismatch(
                    trial=trial, output_index=i, reason=f"output {i} is {c!r}, the reference returns {r!r}"))
            continue
        if not isinstance(c, torch.Tensor):
            return Comparison(False, float("inf"), float("inf"), Mismatch(
                trial=trial, output_index=i, reason=f"output {i} is a {type(c).__name__}, expected a tensor"))
        if tuple(c.shape) != tuple(r.shape):
            return Comparison(False, float("inf"), float("inf"), Mismatch(
                trial=trial, output_index=i, reason=f"output {i} has shape {tuple(c.shape)}, expected {tuple(r.shape)}"))
        if c.dtype != r.dtype:
            return Comparison(False, float("inf"), float("inf"), Mismatch(
                trial=trial, output_index=i, reason=f"output {i} has dtype {c.dtype}, expected {r.dtype}"))
        values = _compare_values(r, c, atol, rtol, strict=strict)
        strict_bad += values.strict_bad
        if c.numel():
            abs_err, rel_err = values.abs_err, values.rel_err
            if values.nonfinite:
                abs_err = rel_err = float("inf")
            worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
        if values.bad:
            idx = [_unravel(j, tuple(c.shape)) for j in values.first]
            cflat, rflat = c.detach().reshape(-1), r.detach().reshape(-1)
            got = [float(cflat[j]) for j in values.first]
            exp = [float(rflat[j]) for j in values.first]
            nan_note = " (the candidate produced NaN/Inf where the reference has finite values)" if any(
                not math.isfinite(v) for v in got) else ""
            return Comparison(False, worst_abs, worst_rel, Mismatch(
                trial=trial, output_index=i, mismatched=values.bad, total=c.numel(), first_indices=idx, got=got,
                expected=exp,
                reason=f"output {i}: {values.bad} of {c.numel()} elements outside atol={atol}, rtol={rtol}{nan_note}"))
    return Comparison(True, worst_abs, worst_rel, strict_bad=strict_bad)
