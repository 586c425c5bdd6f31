"""Compile-checking CUDA candidates where no GPU can run them (CPU mode, CI).

A `load_inline` candidate is executed with `load_inline` replaced by `checking_load_inline`. That compiles the same
units, with the same flags, precompiled header and object cache, as the GPU builder (`cuda_build.build_inline`) would,
stopping before the link (torch's CUDA libraries may be missing here), and reports the compiler's real errors. It
returns a module whose functions refuse to run.
"""

from __future__ import annotations

import os

# Shared with the builder; callers that catch CudaCompileError from this module keep working.
from kernelskill.review.cuda_build import CudaCompileError, build_inline
from kernelskill.review.inline_args import bind

__all__ = ["CHECK_ARCH", "CudaCompileError", "NotRunnable", "checking_load_inline"]

CHECK_ARCH = "9.0"
"""The GPU arch CUDA sources are checked for when TORCH_CUDA_ARCH_LIST does not name one (Hopper, as on the H200)."""


class NotRunnable:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        def refuse(*args, **kwargs):
            raise RuntimeError(f"extension {self._name!r} was compile-checked only: CUDA code does not run on CPU")

        return refuse


def _arch() -> str:
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    return listed if listed and listed != "native" else CHECK_ARCH


def checking_load_inline(*args, **kwargs):
    """Stands in for torch.utils.cpp_extension.load_inline on machines that cannot run CUDA (same arguments)."""
    call = bind(*args, **kwargs)
    built = build_inline(**call.build_kwargs(), arch=_arch(), link=False)
    checking_load_inline.calls.append({"name": call.name, "ok": True, "seconds": built.seconds,
                                       "cache_hit": built.cache_hit, "warnings": built.warnings,
                                       "cuda_variant": built.cuda_variant, "notes": built.notes})
    return NotRunnable(call.name)


checking_load_inline.calls = []
