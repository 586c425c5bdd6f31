"""The review's state and its first stages: a `Worker` holds everything one review creates, from the start; `load`
builds the reference, `compile` the candidate (`first_run` builds Triton's kernels under the verify stage's limit).
The verify and time stages are functions over the same state (verify.py, timed.py); a prebuild is prebuild.py's.
"""

from __future__ import annotations

import random
import threading
import time

from kernelskill.review.results import CompileResult
from kernelskill.review.wire import ReviewRequest
from kernelskill.review.worker.candidate import CandidateCalls, is_cuda_fatal, short_traceback
from kernelskill.review.worker.baseline import compile_in_process, subprocess_failed, warm
from kernelskill.review.worker.checks import problem_of
from kernelskill.review.worker.prebuild import Prebuild
from kernelskill.review.worker.session import Channel, Session, StageLog
from kernelskill.review.worker.timed import time_stage
from kernelskill.review.worker.verify import verify


class Worker:
    """One review in a worker process: the request, the session it runs in, and every piece of state its stages
    fill in (declared here, so a stage never finds an attribute missing because an earlier one failed)."""

    def __init__(self, request: ReviewRequest, channel: Channel, session: Session) -> None:
        from kernelskill.review.guards import OpTrace

        self.req = request
        self.session = session
        self.torch = session.torch
        self.device = session.device
        self.tracker = session.tracker
        self.settings = request.settings
        self.guards = self.settings.guards
        self.log = StageLog(channel, gated=request.gated)  # the current stage, its messages and verdicts
        self.rng = random.Random(request.seeds.order)
        self.flags: set[str] = set()  # reported with the stages' results, and after a verdict
        self.candidate = CandidateCalls(session, self.log, self.guards, self.flags,
                                        request.candidate_path or "<candidate>")
        self.inputs_s = 0.0  # the problem's own cost of making input sets, inside the stages' seconds
        self.on_device_inputs = True  # get_inputs() runs on the GPU unless it failed there at the load stage
        self.inputs_path_fixed = False  # set by the load stage, before any candidate code runs (make_input_sets)
        # load
        self.problem = None  # the request's problem (its source came with the request)
        self.loaded = None  # the problem's module: Model, get_inputs, get_init_inputs
        self.init_inputs: list = []
        self.ref_model = None
        self.warm_inputs: list = []
        # compile
        self.compile_info: CompileResult | None = None
        # verify
        self.ref_trace, self.cand_trace = OpTrace(), OpTrace()  # PyTorch ops each side called (first trial)
        self.profiled: set[str] = set()  # GPU kernel names the profiled trial saw
        self.reference_tf32: dict | None = None  # the TF32 switches as the reference's first verify trial saw them
        self.output_bytes = 0  # the most memory the candidate's outputs held in a trial (a broadcast view: ~none)
        self.left_behind: dict = {}  # weight storages that moving ModelNew replaced, by address (verify.move_candidate)
        self.policy_violations: list[dict] = []  # strict-only rules broken at run time (the policy section)
        # the judge's batch (judged.py): its input sets, then its outputs, between the batch's commands
        self.batch_sets: list = []
        self.batch_outputs: list = []
        self.batch_set_bytes = 0  # one input set of the batch, as the reference runner's `inputs` wrote it
        self.batch_buffer = None  # the batch's input sets, still masked until `calls` (exchange.read_batch)
        self.batch_words = 0  # the masked data region's length in 8-byte words
        self.batch_graph = None  # the batch's calls captured by `prepare` (judged.capture), replayed by `calls`
        self.baseline = None  # torch.compile(Model) made ready by `baseline` (judged.ready_compiled), for its timing

    # inputs -------------------------------------------------------------------------------------------------
    def make_inputs(self, seed: int) -> list:
        """Inputs from get_inputs() under `seed`, on the device; the RNG is re-seeded after so it reveals nothing."""
        return self.make_input_sets(seed, 1)[0]

    def make_input_sets(self, seed: int, count: int) -> list[list]:
        """`count` input sets from get_inputs(), drawn one after another from generators seeded once with `seed`, on
        the device (the judge's batch: one runner makes them all and hands them on, so no set needs a seed of its
        own, and thousands of small sets cost no reseeding each); the RNG is re-seeded after so it reveals nothing.
        Made on the GPU (factory calls default to it), not on the CPU and copied: seconds less per input set for
        large problems. A get_inputs() that needs the CPU falls back to the CPU for the whole review, decided at the
        load stage, before any candidate code has run, so both runners choose alike. Later, the path is fixed: CPU
        inputs drawn under the same seed hold other values than the GPU's, and a runner that switched would judge
        its candidate on other inputs than the reference runner's (after a failed graph capture left the GPU's
        random generator unusable, CUDA-L1's L1/32 failed that way: docs/h200/kernelbench, session 24). A failure
        there is then an error that says so."""
        from kernelskill.problem import call_entry

        start = time.perf_counter()
        sets = None
        if self.device.type == "cuda" and self.on_device_inputs:
            random.seed(seed)
            self.torch.manual_seed(seed)
            try:
                with self.device:
                    sets = [call_entry(self.problem, self.loaded.get_inputs, "get_inputs") for _ in range(count)]
            except Exception as exc:  # noqa: BLE001 - at the load stage: the problem's code, retried on the CPU below
                if self.inputs_path_fixed:
                    raise RuntimeError("the problem's inputs could no longer be made on the GPU in this runner, as "
                                       "they were before the candidate's code ran (made on the CPU they would hold "
                                       f"other values than the other runner's): {exc}") from None
                self.on_device_inputs = False
        if sets is None:
            random.seed(seed)
            self.torch.manual_seed(seed)
            sets = [call_entry(self.problem, self.loaded.get_inputs, "get_inputs") for _ in range(count)]
        self.torch.manual_seed(random.SystemRandom().getrandbits(63))
        random.seed(random.SystemRandom().getrandbits(63))
        sets = [[v.to(self.device) if isinstance(v, self.torch.Tensor) else v for v in values] for values in sets]
        self.inputs_s += time.perf_counter() - start  # the problem's own cost, inside the stages' seconds
        return sets

    def copy_args(self, args: list) -> list:
        return [a.clone() if isinstance(a, self.torch.Tensor) else a for a in args]

    def run_reference(self, args: list):
        with self.torch.no_grad():
            return self.ref_model(*args)

    # stages -------------------------------------------------------------------------------------------------
    def load(self) -> None:
        self.log.stage("load")
        from kernelskill.problem import call_entry, instantiate_problem

        torch = self.torch
        req = self.req
        name = self.session.device_name
        if self.device.type == "cpu" and req.backend == "triton":
            name = "cpu (Triton interpreter)"
        self.log.update(device_name=name)
        self.tracker.launches.clear()

        self.problem = problem_of(req)
        try:
            self.loaded = instantiate_problem(self.problem)
            seeds = req.seeds
            torch.manual_seed(seeds.init)
            self.init_inputs = call_entry(self.problem, self.loaded.get_init_inputs, "get_init_inputs")
            torch.manual_seed(seeds.init)
            self.ref_model = self.loaded.model_cls(*self.init_inputs).to(self.device)
            self.warm_inputs = self.make_inputs(seeds.warm)
            self.inputs_path_fixed = True  # GPU or CPU, chosen before any candidate code ran (make_input_sets)
        except Exception as exc:
            if type(exc).__name__ == "ProblemError":
                raise self.log.fail("bad_problem", str(exc))
            raise self.log.fail("bad_problem", f"{self.problem.path}: building the reference failed: {short_traceback(exc, str(self.problem.path))}")
        try:
            self.run_reference(self.copy_args(self.warm_inputs))
        except Exception as exc:
            raise self.log.fail("bad_problem", f"{self.problem.path}: Model.forward raised on get_inputs(): {short_traceback(exc, str(self.problem.path))}")
        if req.backend == "triton":
            try:
                import triton  # noqa: F401
            except ImportError as exc:  # say what is missing: Triton itself, or numpy for its CPU interpreter
                raise self.log.fail("compile_error", f"Triton cannot be imported here ({type(exc).__name__}: {exc}); "
                                "install it with `pip install triton numpy`")
        self.inputs_s = 0.0  # from here on: input sets made while verifying and timing
        self.log.end_stage()

    def compile(self) -> None:
        self.log.stage("compile")
        torch = self.torch
        from kernelskill.problem import load_module
        from kernelskill.review.cuda import CudaCompileError, inline

        req = self.req
        start = time.perf_counter()
        checked_only = req.backend == "cuda" and self.device.type == "cpu"
        builds_before = len(inline.BUILDS)
        threads = set(threading.enumerate())
        try:
            module = load_module(req.candidate_source, self.candidate.file, "kernelskill_candidate")
        except CudaCompileError as exc:
            raise self.log.fail("compile_error", str(exc), compile_errors=exc.log)
        except Exception as exc:
            detail = short_traceback(exc, self.candidate.file)
            if "Error building extension" in str(exc):  # torch's message leads with command lines: lead with errors
                from kernelskill.review.logs import compiler_errors, trim_log

                raise self.log.fail("compile_error", "the CUDA extension failed to build:\n" + compiler_errors(str(exc)),
                                compile_errors=trim_log(str(exc)))
            raise self.log.fail("compile_error", "the candidate failed to build or import:\n" + detail, compile_errors=detail)
        model_new = getattr(module, "ModelNew", None)
        if not isinstance(model_new, type) or not issubclass(model_new, torch.nn.Module):
            raise self.log.fail("bad_candidate", f"{self.candidate.file}: `ModelNew` must be an nn.Module subclass")
        try:
            torch.manual_seed(req.seeds.init)
            self.candidate.model = model_new(*self.init_inputs).to(self.device)
        except Exception as exc:
            detail = short_traceback(exc, self.candidate.file)
            raise self.log.fail("compile_error", "ModelNew(*get_init_inputs()) raised:\n" + detail, compile_errors=detail)
        self.candidate.check_threads(threads)
        compile_info = CompileResult(ok=True, backend=req.backend, checked_only=checked_only)
        builds = inline.BUILDS[builds_before:]  # what the extension builder did: cache hits, steps, warnings
        if checked_only:
            compile_info.warnings = [w for b in builds for w in b.warnings]
            compile_info.builds = [{k: b.to_dict()[k] for k in ("name", "cache_hit", "seconds", "cuda_variant",
                                                                   "notes")} for b in builds]
            compile_info.duration_s = round(time.perf_counter() - start, 3)
            self.log.update(compiled=True, compile=compile_info, flags=["cuda_not_run_on_cpu"])
            self.log.end_stage()
            return
        compile_info.duration_s = round(time.perf_counter() - start, 3)
        if builds:
            compile_info.builds = [{k: b.to_dict()[k] for k in ("name", "cache_hit", "seconds", "steps", "pch_used",
                                                                   "cuda_variant", "notes")} for b in builds]
            compile_info.warnings = [w for b in builds for w in b.warnings]
        self.compile_info = compile_info
        self.log.update(compiled=True, compile=compile_info)
        self.log.end_stage()

    def first_run(self) -> None:
        """Triton compiles at the first launch: one call on unrelated inputs builds every kernel.

        It runs under the verify stage's time limit (a forward that hangs is a verify failure), but a compilation
        error it raises is reported as the compile failure it is.
        """
        compile_info = self.compile_info
        start = time.perf_counter()
        threads = set(threading.enumerate())
        try:
            try:
                self._first_call()
            except Exception as exc:
                if not subprocess_failed(exc):
                    raise
                # a candidate that hands its model to torch.compile (CUDA-L1's L2/49) met Inductor's compile pool
                # failing (on the H200: Triton's GPU detection in its forked workers), not a failure of its own
                said = compile_in_process(exc, "the candidate's torch.compile")
                self.flags.add(f"inductor_compiled_in_process: the candidate's torch.compile failed in Inductor's "
                               f"compile subprocess ({said}); its first call was made again with the kernels "
                               "compiled in the worker's own process")
                self._first_call()
        except Exception as exc:
            if "CompilationError" in type(exc).__name__ or type(exc).__module__.startswith("triton.compiler"):
                detail = short_traceback(exc, self.candidate.file)
                self.log.name = "compile"
                raise self.log.fail("compile_error", "Triton failed to compile a kernel:\n" + detail, compile_errors=detail)
            self.log.update(compiled=True, compile=compile_info)
            if is_cuda_fatal(exc):
                raise self.log.fail("crash", f"CUDA error on the first run: {short_traceback(exc, self.candidate.file)}")
            raise self.log.fail("runtime_error", "the candidate raised on its first run:\n" + short_traceback(exc, self.candidate.file))
        compile_info.first_call_s = round(time.perf_counter() - start, 3)
        self.log.update(compiled=True, compile=compile_info)
        self.candidate.check_threads(threads)
        self.candidate.check_integrity()

    def _first_call(self) -> None:
        torch = self.torch
        with torch.no_grad():
            self.candidate.model(*self.copy_args(self.warm_inputs))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self) -> None:
        if self.req.mode == "build":
            Prebuild(self.req, self.log, self.torch).run()
            return
        if self.req.mode == "warm":
            warm(self)
            return
        if self.req.mode == "reference":  # the problem's code only; the judge's commands follow (judged.py)
            self.load()
            return
        self.load()
        self.compile()
        if self.req.backend == "cuda" and self.device.type == "cpu":
            return
        verify(self)
        if self.settings.timing:
            time_stage(self)
