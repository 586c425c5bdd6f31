"""One evaluation per GPU at a time: timing needs the GPU to itself. Tasks take a GPU from the pool for each review
or profile and give it back; the worker sees only that GPU (CUDA_VISIBLE_DEVICES)."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from contextlib import contextmanager


class GpuPool:
    def __init__(self, devices: list[str] | None) -> None:
        """`devices`: GPU indices ("0", "1" …); None or empty: the CPU (a single slot, no CUDA_VISIBLE_DEVICES)."""
        self.devices = list(devices or [])
        self._free: queue.Queue[str | None] = queue.Queue()
        for d in self.devices or [None]:
            self._free.put(d)
        self.wait_s = 0.0  # total time tasks waited for a device (queue time)

    @property
    def slots(self) -> int:
        return max(1, len(self.devices))

    @contextmanager
    def acquire(self) -> Iterator[dict[str, str]]:
        start = time.monotonic()
        device = self._free.get()
        self.wait_s += time.monotonic() - start
        try:
            yield {} if device is None else {"CUDA_VISIBLE_DEVICES": device}
        finally:
            self._free.put(device)


def parse_gpus(spec: str | None) -> list[str] | None:
    """`--gpus 0,1` → ["0", "1"]; None → None (all visible GPUs are decided by the caller)."""
    if spec is None:
        return None
    items = [p.strip() for p in spec.split(",") if p.strip()]
    for item in items:
        if not item.isdigit():
            from kernelskill.errors import KernelSkillError

            raise KernelSkillError(f"--gpus: {item!r} is not a GPU index; write e.g. --gpus 0,1")
    return items
