"""Figures worked out from a timing besides its GPU speedup: the speedup at the pace of calls made back to back from
Python (a side whose launches outlast its kernels sets its own pace there), and the speedup over torch.compile(Model)
(`--baseline compile`), which the reference runner times beside the reference."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelskill.review.judge import ReferenceRun
    from kernelskill.review.results import TimingResult


def host_paced(ref_gpu_ms: float, ref_host_ms: float | None, cand_gpu_ms: float,
               cand_host_ms: float | None) -> tuple[float | None, list[str]]:
    """(the speedup at the pace of calls made back to back from Python, flags) from each side's GPU time per call
    (prefilled samples) and the host's time to enqueue one. Called back to back, a call takes about max(launch,
    GPU): the figure a caller of forward() sees when the launches, not the kernels, set the pace. None without both
    host times. A side whose launches outlast its GPU work is flagged (on the H200 CUDA-L1's L2/41: the reference
    took 300 us to launch 52 us of GPU work, 6.5x at the launches' pace against 1.16x on the GPU)."""
    if not ref_host_ms or not cand_host_ms or ref_gpu_ms <= 0 or cand_gpu_ms <= 0:
        return None, []
    paced = max(ref_host_ms, ref_gpu_ms) / max(cand_host_ms, cand_gpu_ms)
    sides = {"candidate": (cand_host_ms, cand_gpu_ms), "reference": (ref_host_ms, ref_gpu_ms)}
    flags = []
    for name, other, flag in (("candidate", "reference", "host_bound"), ("reference", "candidate",
                                                                         "reference_host_bound")):
        (host, gpu), (other_host, other_gpu) = sides[name], sides[other]
        if host > gpu:
            flags.append(f"{flag}: the {name}'s host takes {host * 1e3:.1f} us to launch a call that runs "
                         f"{gpu * 1e3:.1f} us on the GPU (the {other}: {other_host * 1e3:.1f} us to launch, "
                         f"{other_gpu * 1e3:.1f} us to run); called back to back from Python, the launches set its "
                         f"pace: {paced:.2f}x there against {ref_gpu_ms / cand_gpu_ms:.2f}x on the GPU")
    return paced, flags


def compile_host_paced(comp_gpu_ms: float, comp_host_ms: float | None, cand_gpu_ms: float,
                       cand_host_ms: float | None) -> tuple[float | None, str | None]:
    """(the speedup over torch.compile(Model) at the pace of calls made back to back from Python, the
    `compile_host_bound` flag where the compiled module's host work per call outlasts its GPU work). On the H200 it
    did for most CUDA-L1 level-2 tasks under 50 us: a compiled forward took a median 270 us of host time to launch,
    and CUDA-L1's published speedups over torch.compile matched this figure, not the GPU's
    (docs/h200/kernelbench/compile)."""
    paced, _ = host_paced(comp_gpu_ms, comp_host_ms, cand_gpu_ms, cand_host_ms)
    if paced is None or comp_host_ms is None or comp_host_ms <= comp_gpu_ms:
        return paced, None
    return paced, (f"compile_host_bound: torch.compile(Model)'s host takes {comp_host_ms * 1e3:.1f} us to launch a "
                   f"call that runs {comp_gpu_ms * 1e3:.1f} us on the GPU; called back to back from Python, the "
                   f"candidate is {paced:.2f}x faster than it there, {comp_gpu_ms / cand_gpu_ms:.2f}x on the GPU")


def compile_baseline(result: TimingResult, ref: ReferenceRun, cand_pace_ms: float) -> list[str]:
    """The speedup over torch.compile(Model) (`--baseline compile`) into `result`, and its flags: the compiled
    reference as the reference runner timed it, beside the reference, against the candidate's bounded time (at the
    launches' pace: its pace in the judge's batch, `cand_pace_ms`). The candidate runner never compiles it (a
    process that ran the candidate could slow it)."""
    if ref.compile_error:
        return [f"compile_baseline_failed: torch.compile(Model) raised {ref.compile_error}"]
    if ref.compiled is None:
        return []
    comp, cand = ref.compiled, result.candidate
    result.compiled_reference, result.compile_warmup = comp, ref.compile_warmup
    result.speedup_vs_compile = comp.mean_ms / cand.mean_ms
    result.method += ("; torch.compile(Model) timed in the reference runner, beside the reference"
                      + (f" (called once before the loop, {ref.compile_warmup.seconds:.1f} s: "
                         f"{ref.compile_warmup.cache_words()})" if ref.compile_warmup else ""))
    result.speedup_vs_compile_host_paced, bound = compile_host_paced(
        comp.median_ms, ref.compiled_host_ms, cand.median_ms, cand_pace_ms or None)
    return [bound] if bound else []
