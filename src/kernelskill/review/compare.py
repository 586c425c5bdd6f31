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


def _first_indices(bad: torch.Tensor, limit: int = 5) -> list[list[int]]:
    flat = bad.reshape(-1).nonzero()[:limit, 0].tolist()
    return [list(map(int, torch.unravel_index(torch.tensor(i), bad.shape))) if bad.dim() else [] for i in flat]


def compare_outputs(ref_out, cand_out, atol: float, rtol: float, trial: int) -> Comparison:
    """Compare every returned tensor. NaN/Inf in the candidate where the reference has none fails."""
    refs, cands = flatten_outputs(ref_out), flatten_outputs(cand_out)
    if len(refs) != len(cands):
        return Comparison(False, float("inf"), float("inf"), Mismatch(
            trial=trial, reason=f"returned {len(cands)} output(s), the reference returns {len(refs)}"))
    worst_abs = worst_rel = 0.0
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
        r64 = r.detach().to(device=c.device, dtype=torch.float64) if r.dtype != torch.bool else r.to(c.device)
        c64 = c.detach().to(torch.float64) if c.dtype != torch.bool else c
        if r.dtype == torch.bool:
            bad = c64 != r64
            diff = bad.to(torch.float64)
            rel = diff
        else:
            # NaN matches NaN and Inf matches Inf of the same sign; anything else non-finite fails
            close = torch.isclose(c64, r64, rtol=rtol, atol=atol, equal_nan=True)
            bad = ~close
            diff = (c64 - r64).abs()
            rel = diff / r64.abs().clamp_min(torch.finfo(torch.float64).tiny)
        finite = torch.isfinite(diff)
        if c64.numel():
            has_rel = finite & (r64 != 0)
            abs_err = float(diff[finite].max()) if bool(finite.any()) else 0.0
            rel_err = float(rel[has_rel].max()) if bool(has_rel.any()) else 0.0
            if bool((bad & ~finite).any()):  # a NaN or Inf where the reference has none
                abs_err = rel_err = float("inf")
            worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
        n_bad = int(bad.sum())
        if n_bad:
            idx = _first_indices(bad)
            got = [float(c64[tuple(j)]) for j in idx]
            exp = [float(r64[tuple(j)]) for j in idx]
            nan_note = " (the candidate produced NaN/Inf where the reference has finite values)" if any(
                not math.isfinite(v) for v in got) else ""
            return Comparison(False, worst_abs, worst_rel, Mismatch(
                trial=trial, output_index=i, mismatched=n_bad, total=c.numel(), first_indices=idx, got=got,
                expected=exp,
                reason=f"output {i}: {n_bad} of {c.numel()} elements outside atol={atol}, rtol={rtol}{nan_note}"))
    return Comparison(True, worst_abs, worst_rel)
