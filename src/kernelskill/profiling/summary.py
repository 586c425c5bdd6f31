"""What the profiler runs hand back besides ncu's metrics: the PyTorch profiler's kernels per forward, and the
state of the ncu run (whether its metrics exist, and if not, why).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from kernelskill.errors import KernelSkillError

NcuStatus = Literal["ok", "not_provided", "missing", "not_permitted", "timed_out", "failed"]


class ProfilerKernel(BaseModel):
    name: str
    count: int = Field(ge=1)  # launches over all profiled forwards
    total_time_us: float = Field(ge=0)  # GPU time over all profiled forwards


class ProfilerSummary(BaseModel):
    """Kernel launches recorded by the PyTorch profiler over `forwards` calls of the candidate's forward."""

    source: str = "torch.profiler"
    forwards: int = Field(ge=1)
    forward_time_us: float | None = Field(default=None, gt=0)  # mean wall time of one forward, synchronized
    kernels: list[ProfilerKernel]


def load_profiler_summary(path: str | Path) -> ProfilerSummary:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KernelSkillError(f"{p}: cannot read the run-features JSON: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise KernelSkillError(f"{p}: line {exc.lineno}: not valid JSON: {exc.msg}") from None
    try:
        return ProfilerSummary.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise KernelSkillError(
            f"{p}: {key}: {first['msg']} (expected {{\"forwards\": N, \"forward_time_us\": T, "
            f"\"kernels\": [{{\"name\": ..., \"count\": ..., \"total_time_us\": ...}}]}})"
        ) from None
