"""The problem's speed of light: the least time any kernel could take for the problem's work on a given GPU.

    floor_ms(flops, bytes_moved, precision, gpu)  ->  max(flops / peak(precision), bytes / HBM bandwidth), in ms

`flops` is the problem's minimum arithmetic (the matrix products and convolutions a FLOP counter sees), `bytes_moved`
the least DRAM traffic (inputs, outputs and parameters, each moved once). A kernel's distance to this floor is
headroom that no unit counter shows: a serial softmax can keep one SM pipe 80 % busy at 0.4 % of its floor.

Peaks are dense (no 2:4 sparsity) datasheet figures at boost clock; a GPU or a precision not in the table gives
None - an unknown floor, never a guessed one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class GpuPeaks:
    id: str
    name: str
    pattern: str  # regex over the device name ncu / PyTorch report ("NVIDIA H200", "NVIDIA H100 80GB HBM3")
    tflops: dict[str, float]  # precision -> dense TFLOP/s (fp32: the FMA pipes; the others: tensor cores)
    hbm_tbps: float  # DRAM bandwidth, TB/s
    l2_mb: float  # L2 cache: written data this large can still sit there when a timed call ends

    def peak_flops(self, precision: str) -> float | None:
        tf = self.tflops.get(precision)
        return tf * 1e12 if tf is not None else None


# Datasheet figures (NVIDIA H200 / H100 / A100 product briefs), dense.
GPUS: tuple[GpuPeaks, ...] = (
    GpuPeaks("h200", "NVIDIA H200 SXM", r"\bH200\b",
             {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, hbm_tbps=4.8, l2_mb=60),
    GpuPeaks("h100_pcie", "NVIDIA H100 PCIe", r"\bH100\b.*\bPCIe\b",
             {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0}, hbm_tbps=2.0, l2_mb=50),
    GpuPeaks("h100_sxm", "NVIDIA H100 SXM", r"\bH100\b",
             {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, hbm_tbps=3.35, l2_mb=50),
    GpuPeaks("a100_sxm", "NVIDIA A100 SXM 80GB", r"\bA100\b",
             {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, hbm_tbps=2.039, l2_mb=40),
)  # fmt: skip


def find_gpu(name: str | None) -> GpuPeaks | None:
    """The table entry for a GPU id ("h200") or device name ("NVIDIA H200"); None when it is not in the table."""
    if not name:
        return None
    for g in GPUS:
        if name.strip().lower() == g.id:
            return g
    for g in GPUS:  # first match wins: "H100 PCIe" is listed before the plain H100 (SXM)
        if re.search(g.pattern, name, flags=re.IGNORECASE):
            return g
    return None


def floor_ms(flops: float, bytes_moved: float, precision: str, gpu: str | GpuPeaks | None) -> float | None:
    """The problem's floor time in milliseconds, or None when the GPU or its peak for `precision` is unknown."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} (known: {', '.join(PRECISIONS)})")
    if flops < 0 or bytes_moved < 0:
        raise ValueError("flops and bytes must not be negative")
    peaks = gpu if isinstance(gpu, GpuPeaks) else find_gpu(gpu)
    if peaks is None:
        return None
    peak = peaks.peak_flops(precision)
    if peak is None:
        return None
    compute_s = flops / peak
    memory_s = bytes_moved / (peaks.hbm_tbps * 1e12)
    return max(compute_s, memory_s) * 1e3


def hard_floor_ms(output_bytes: float, gpu: str | GpuPeaks | None) -> float | None:
    """The least time any implementation needs, whatever algorithm it uses: writing the outputs that cannot still
    sit in L2 when the call ends, at full DRAM bandwidth. `floor_ms` counts the reference's FLOPs and all its bytes,
    which a kernel doing less work legitimately beats (a diagonal matrix product done as a row scaling); this one
    only a kernel that skips writing its result can, or a clock that missed its work."""
    peaks = gpu if isinstance(gpu, GpuPeaks) else find_gpu(gpu)
    if peaks is None:
        return None
    return max(0.0, output_bytes - peaks.l2_mb * 1e6) / (peaks.hbm_tbps * 1e12) * 1e3


def compute_precision(dtype: str, has_matmul: bool) -> str:
    """The precision whose peak bounds a problem computed in `dtype` (torch dtype name, e.g. "float32").

    FP32 matrix products run on TF32 tensor cores within the project's 1e-2 tolerance (the reduce-precision method
    relies on it), so their floor uses the TF32 peak; FP32 work without matrix products is bound by the FMA pipes.
    """
    d = dtype.replace("torch.", "")
    if d in ("float16", "half"):
        return "fp16"
    if d == "bfloat16":
        return "bf16"
    if d.startswith("float8"):
        return "fp8"
    return "tf32" if has_matmul else "fp32"
