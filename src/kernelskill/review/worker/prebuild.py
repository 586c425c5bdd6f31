"""A prebuild: a worker that sees no GPU runs a CUDA candidate's module code, and constructs and calls its ModelNew
on PyTorch's meta device, with load_inline building into the shared build cache. Nothing runs a kernel or is
reviewed; the review on the GPU then finds its extensions built.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

from kernelskill.review.wire import ReviewRequest
from kernelskill.review.worker.candidate import short_traceback
from kernelskill.review.worker.checks import problem_of
from kernelskill.review.worker.session import StageLog


class Prebuild:
    def __init__(self, request: ReviewRequest, log: StageLog, torch) -> None:
        self.req, self.log, self.torch = request, log, torch
        self.file = request.candidate_path or "<candidate>"

    def run(self) -> None:
        """Prebuild (no GPU here): run the candidate's module code with load_inline building into the shared cache.

        The extensions it returns cannot run (nothing is loaded); module code that calls them at import time ends
        the prebuild early, and the review on the GPU builds what is left.
        """
        self.log.stage("compile")
        from kernelskill.problem import load_module
        from kernelskill.review.cuda import CudaCompileError, inline

        req = self.req
        before = len(inline.BUILDS)
        try:
            # the stand-in pauses construct_for_builds' alarm while it builds
            with inline.installed("build", arch=req.arch), _pretend_gpu(self.torch, req.arch):
                module = load_module(req.candidate_source, self.file, "kernelskill_candidate")
                self.construct_for_builds(module)
        except CudaCompileError as exc:
            raise self.log.fail("compile_error", str(exc), compile_errors=exc.log)
        except Exception as exc:  # noqa: BLE001 - not a verdict: the review runs the module for real
            self.log.update(prebuild_stopped=short_traceback(exc, self.file))
        self.log.update(prebuild=[{"name": b.name, "failed_outside_own_code": b.failed} if b.failed else
                              {"name": b.name, "cache_hit": b.cache_hit, "seconds": round(b.seconds, 3),
                               "steps": b.steps} for b in inline.BUILDS[before:]])
        self.log.end_stage()

    def construct_for_builds(self, module) -> None:
        """Many published kernels call load_inline in ModelNew's constructor or on their first forward: construct
        ModelNew and call it once, so those extensions are prebuilt too. On PyTorch's meta device: constructors and
        forwards also warm up or autotune on full-size inputs, which on the CPU can take minutes (it held every
        prebuild slot of a bench on the H200); on meta tensors that costs nothing and fails fast where real data is
        needed. Python left to loop is cut off after PREBUILD_CALL_S. Whatever fails after the builds is the
        review's to see."""
        import signal

        from kernelskill.problem import call_entry, instantiate_problem
        from kernelskill.review.cuda import CudaCompileError

        model_new = getattr(module, "ModelNew", None)
        if not isinstance(model_new, type):
            return
        problem = problem_of(self.req)
        loaded = instantiate_problem(problem)

        limit = self.req.prebuild_call_s

        def out_of_time(*_):
            raise TimeoutError(f"constructing and calling ModelNew on meta tensors took over {limit} s")

        previous = signal.signal(signal.SIGALRM, out_of_time)
        signal.alarm(limit)  # paused while an extension builds (the load_inline stand-in in "build" mode)
        try:
            with self.torch.device("meta"), self.torch.no_grad():
                init_inputs = call_entry(problem, loaded.get_init_inputs, "get_init_inputs")
                model = model_new(*init_inputs)
                inputs = call_entry(problem, loaded.get_inputs, "get_inputs")
                try:
                    model(*inputs)
                except CudaCompileError:
                    raise
                except Exception:  # noqa: BLE001 - the forward's own failures (meta data, no GPU) end it quietly
                    pass
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)



@contextmanager
def _pretend_gpu(torch, arch: str):
    """Within a prebuild (a process that sees no GPU), answer candidate code as the GPU review's process would:
    `torch.cuda.is_available()` is True, the device is the review's (its compute capability, device 0), `.cuda()`
    and `device="cuda"` land on the meta device, and synchronizing is a no-op. Published kernels build their
    extensions under `if torch.cuda.is_available():` and move weights with `.cuda()` in their constructors; without
    this their builds were all left to the review, on the GPU's clock. Nothing here runs a kernel or is reviewed."""
    from torch.overrides import TorchFunctionMode

    cuda = torch.cuda
    major, minor = re.match(r"(\d+)\.(\d+)", arch).groups()  # "9.0", "9.0a", "10.0f+PTX"
    capability = (int(major), int(minor))
    fakes = {"is_available": lambda: True, "device_count": lambda: 1, "current_device": lambda: 0,
             "get_device_capability": lambda *_a, **_k: capability, "synchronize": lambda *_a, **_k: None}
    saved = {name: getattr(cuda, name) for name in fakes}

    def meta(device):
        try:
            if isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda":
                return torch.device("meta")
        except RuntimeError:  # a string that names no device: the call's own error to raise
            pass
        return device

    class CudaAsMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                return args[0]
            if "device" in kwargs:
                kwargs["device"] = meta(kwargs["device"])
            if func is torch.Tensor.to:
                args = tuple(meta(a) if isinstance(a, (str, torch.device)) else a for a in args)
            return func(*args, **kwargs)

    for name, fake in fakes.items():
        setattr(cuda, name, fake)
    try:
        with CudaAsMeta():
            yield
    finally:
        for name, original in saved.items():
            setattr(cuda, name, original)

