"""Where a runner makes its input sets (review/worker/stages.py `make_input_sets`): on the GPU, or on the CPU for a
get_inputs() that needs it, chosen once at the load stage, before any candidate code has run, so both runners choose
alike. After a failed graph capture left the GPU's random generator unusable, a runner switched to the CPU half-way
through a review and judged CUDA-L1's L1/32 on other inputs than the reference runner's (docs/h200/kernelbench,
session 24, H100). The device here is a stand-in that says "cuda"; the draws are real CPU torch."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kernelskill.review.worker.stages import Worker


def _worker(gpu: dict) -> SimpleNamespace:
    def get_inputs():
        if gpu["broken"] and gpu["inside"]:
            raise RuntimeError("Offset increment outside graph capture encountered unexpectedly.")
        return [torch.randn(4)]

    class _Device:  # torch.device("cuda") as a context: factory calls inside it default to the GPU
        type = "cuda"

        def __enter__(self):
            gpu["inside"] = True
            return self

        def __exit__(self, *exc) -> bool:
            gpu["inside"] = False
            return False

    # values are not moved to the stand-in device: no tensor is the stand-in torch's Tensor
    fake_torch = SimpleNamespace(Tensor=type("NotATensor", (), {}), manual_seed=torch.manual_seed)
    return SimpleNamespace(device=_Device(), torch=fake_torch, on_device_inputs=True, inputs_path_fixed=False,
                           problem=SimpleNamespace(path=Path("problem.py")),
                           loaded=SimpleNamespace(get_inputs=get_inputs), inputs_s=0.0)


def test_a_get_inputs_that_fails_on_the_gpu_at_the_load_stage_runs_on_the_cpu_for_the_review():
    gpu = {"broken": True, "inside": False}
    w = _worker(gpu)
    first = Worker.make_input_sets(w, 7, 1)
    assert not w.on_device_inputs and len(first) == 1
    w.inputs_path_fixed = True  # the load stage's end
    again = Worker.make_input_sets(w, 7, 1)
    assert torch.equal(first[0][0], again[0][0])  # the same seed, the same path, the same values


def test_after_the_load_stage_a_runner_that_can_no_longer_draw_on_the_gpu_says_so_rather_than_switching():
    gpu = {"broken": False, "inside": False}
    w = _worker(gpu)
    Worker.make_input_sets(w, 7, 1)
    w.inputs_path_fixed = True
    gpu["broken"] = True  # e.g. a failed capture left the GPU's random generator marked as capturing
    with pytest.raises(RuntimeError, match="could no longer be made on the GPU"):
        Worker.make_input_sets(w, 7, 1)
    assert w.on_device_inputs
