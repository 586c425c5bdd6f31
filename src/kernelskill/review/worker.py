"""The review worker: a process started by `sandbox.WorkerPool` that serves one review after another.

At start it imports torch, sets up the device and takes its guards' snapshots (`Session`), then says it is ready.
It reads requests (one JSON line each) on stdin, runs the stages load → compile → verify → time for each, and reports
progress and results as JSON lines on the file descriptor named by argv[1]; the candidate's own prints go to
stdout/stderr, which point at each review's log file. It announces each stage before starting it, so the parent can
enforce a time limit per stage and knows which stage a crash or a hang happened in. After each review it says
whether it is still fit to serve another: the harness's functions untouched and no thread left behind.
"""

from __future__ import annotations

import os
import random
import re
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

from kernelskill.review.wire import (DoneMessage, Message, ReadyMessage, ReviewRequest, StageMessage, StageResults,
                                     StageSecondsMessage, UpdateMessage, VerdictMessage, encode)


class Verdict(Exception):
    """Ends the review with its verdict message."""

    def __init__(self, message: VerdictMessage) -> None:
        super().__init__(message.error)
        self.message = message


class Channel:
    def __init__(self, fd: int) -> None:
        self.stream = os.fdopen(fd, "w", buffering=1)

    def send(self, message: Message) -> None:
        self.stream.write(encode(message))
        self.stream.flush()


def _short_traceback(exc: BaseException, filename: str) -> str:
    """The exception with only the frames from the candidate's file (the part its author can act on)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    lines = [f"  {f.filename}:{f.lineno} in {f.name}: {f.line}" for f in frames[-4:]]
    text = f"{type(exc).__name__}: {exc}".strip()
    return "\n".join(lines + [text])


def _is_cuda_fatal(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return "AcceleratorError" in text or "CUDA error" in text or "illegal memory access" in text or "cudaError" in text


class Session:
    """What a worker process sets up once and every review shares: torch, the device, the guards' snapshots.

    The snapshots are taken before any candidate code runs in the process; after each review `fit()` says whether
    the process is still as it was (the same harness functions, no extra threads).
    """

    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        self.device_type = device
        if device == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError("no CUDA device is visible in the worker")
            self.device = torch.device("cuda", 0)
            torch.cuda.set_device(self.device)
            self.device_name = torch.cuda.get_device_name(self.device)
            self.capability = "%d.%d" % torch.cuda.get_device_capability(self.device)
        else:
            self.device = torch.device("cpu")
            self.device_name, self.capability = "cpu", None
        import torch._dynamo  # noqa: F401  (it re-wraps torch.manual_seed on import: let that happen before the snapshot)

        from kernelskill.review.confine import hash_sources_from_memory

        hash_sources_from_memory()  # the sandbox keeps the problem and candidate files closed; their sources are here

        from kernelskill.review.cuda import inline
        from kernelskill.review.guards import Integrity, KernelTracker, ModuleSnapshot, backend_flags

        # CUDA extensions: on a GPU the content-addressed fast builder, on CPU a compile check (nothing can run)
        inline.install("check" if device == "cpu" else "run")
        self.tracker = KernelTracker()
        self.tracker.install()
        self.integrity = Integrity()  # before any candidate code runs
        self.snapshot = ModuleSnapshot()
        self.threads = set(threading.enumerate())
        self.backend_flags = backend_flags()  # cudnn.benchmark, TF32 ...: put back after every review
        self.unrestored: list[str] = []

    def fit(self) -> list[str]:
        """Why this process should not serve another review (empty: it may)."""
        problems = [f"replaced harness function {name}" for name in self.integrity.tampered()]
        changed = self.snapshot.changed()
        if changed:
            problems.append(f"{len(changed)} torch/stdlib attribute(s) replaced: {', '.join(changed[:8])}")
        left = [t.name for t in threading.enumerate() if t not in self.threads and t.is_alive()]
        if left:
            problems.append(f"threads left running: {left}")
        if self.unrestored:
            problems.append(f"global PyTorch settings could not be restored: {', '.join(self.unrestored)}")
        return problems

    def clean_up(self) -> None:
        """Drop one review's modules and memory so the next review starts from the same state."""
        import gc

        from kernelskill.review.guards import restore_backend_flags

        self.unrestored = restore_backend_flags(self.backend_flags)
        for name in ("kernelskill_candidate", "kernelskill_problem"):
            sys.modules.pop(name, None)
        gc.collect()
        if self.device_type == "cuda":
            self.torch.cuda.synchronize(self.device)
            self.torch.cuda.empty_cache()


class Worker:
    def __init__(self, request: ReviewRequest, channel: Channel, session: Session) -> None:
        self.req = request
        self.ch = channel
        self.session = session
        self.torch = session.torch
        self.device = session.device
        self.tracker = session.tracker
        self.integrity = session.integrity
        self.settings = request.settings
        self.guards = self.settings.guards
        self.stage_name = "load"
        self.rng = random.Random(request.seeds.order)
        self.inputs_s = 0.0
        self.on_device_inputs = True

    # plumbing -------------------------------------------------------------------------------------------------
    def stage(self, name: str) -> None:
        self.stage_name = name
        self._stage_start = time.perf_counter()
        self.ch.send(StageMessage(stage=name))

    def end_stage(self) -> None:
        self.ch.send(StageSecondsMessage(stage=self.stage_name, seconds=round(time.perf_counter() - self._stage_start, 3)))

    def update(self, **data) -> None:
        self.ch.send(UpdateMessage(data=StageResults(**data)))

    def fail(self, kind: str, error: str, **extra) -> Verdict:
        return Verdict(VerdictMessage(stage=self.stage_name, kind=kind, error=error, **extra))

    def check_integrity(self) -> None:
        if not self.guards.integrity:
            return
        tampered = self.integrity.tampered()
        if tampered:
            raise self.reject("runtime:integrity", "replaced harness functions: " + ", ".join(tampered))

    def check_threads(self, before: set) -> None:
        """Threads started by candidate code must not outlive the call that started them."""
        if not self.guards.no_threads:
            return
        new = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        library = [t.name for t in new if _compile_worker_thread(t)]
        if library:  # torch.compile's and tqdm's own workers, started once per process: not the candidate's work
            self.flags.add(f"library_threads: {sorted(library)}")
        new = [t.name for t in new if not _compile_worker_thread(t)]
        if new:
            raise self.reject("runtime:threads", f"the candidate left {len(new)} thread(s) running: {new}")

    def reject(self, check: str, detail: str) -> Verdict:
        return self.fail("rejected", f"rejected by check {check}: {detail}", checks=[{"name": check, "detail": detail}])

    # inputs -------------------------------------------------------------------------------------------------
    def make_inputs(self, seed: int) -> list:
        """Inputs from get_inputs() under `seed`, on the device; the RNG is re-seeded after so it reveals nothing."""
        from kernelskill.problem import call_entry

        start = time.perf_counter()
        values = None
        if self.device.type == "cuda" and self.on_device_inputs:
            # Made on the GPU (factory calls default to it), not on the CPU and copied: seconds less per input set
            # for large problems. A get_inputs() that needs the CPU falls back to the CPU for the whole review.
            self.torch.manual_seed(seed)
            try:
                with self.device:
                    values = call_entry(self.problem, self.loaded.get_inputs, "get_inputs")
            except Exception:  # noqa: BLE001 - the problem's code, not the candidate's: retried on the CPU below
                self.on_device_inputs = False
        if values is None:
            self.torch.manual_seed(seed)
            values = call_entry(self.problem, self.loaded.get_inputs, "get_inputs")
        self.torch.manual_seed(random.SystemRandom().getrandbits(63))
        values = [v.to(self.device) if isinstance(v, self.torch.Tensor) else v for v in values]
        self.inputs_s += time.perf_counter() - start  # the problem's own cost, inside the stages' seconds
        return values

    def copy_args(self, args: list) -> list:
        return [a.clone() if isinstance(a, self.torch.Tensor) else a for a in args]

    def call_candidate(self, args: list):
        """The candidate's forward and nothing else: what the timer measures (no synchronization, no checks)."""
        try:
            with self.torch.no_grad():
                return self.cand_model(*args)
        except Verdict:
            raise
        except Exception as exc:
            if _is_cuda_fatal(exc):
                raise self.fail("crash", f"CUDA error while running the candidate: {_short_traceback(exc, self.cand_file)}")
            raise self.fail("runtime_error", "the candidate raised while running:\n" + _short_traceback(exc, self.cand_file))

    def run_candidate(self, args: list):
        """A checked call: forward, wait for the device (surfacing asynchronous CUDA errors), no threads left."""
        threads = set(threading.enumerate())
        out = self.call_candidate(args)
        self.sync_after_candidate()
        self.check_threads(threads)
        return out

    def sync_after_candidate(self) -> None:
        if self.device.type == "cuda":
            try:
                self.torch.cuda.synchronize(self.device)
            except Exception as exc:
                raise self.fail("crash", f"CUDA error after the candidate ran: {type(exc).__name__}: {exc}")

    def run_reference(self, args: list):
        with self.torch.no_grad():
            return self.ref_model(*args)

    # stages -------------------------------------------------------------------------------------------------
    def load(self) -> None:
        self.stage("load")
        from kernelskill.problem import call_entry, instantiate_problem

        torch = self.torch
        req = self.req
        name = self.session.device_name
        if self.device.type == "cpu" and req.backend == "triton":
            name = "cpu (Triton interpreter)"
        self.update(device_name=name)
        self.tracker.launches.clear()

        self.problem = _problem_of(req)
        try:
            self.loaded = instantiate_problem(self.problem)
            seeds = req.seeds
            torch.manual_seed(seeds.init)
            self.init_inputs = call_entry(self.problem, self.loaded.get_init_inputs, "get_init_inputs")
            torch.manual_seed(seeds.init)
            self.ref_model = self.loaded.model_cls(*self.init_inputs).to(self.device)
            self.warm_inputs = self.make_inputs(seeds.warm)
        except Exception as exc:
            if type(exc).__name__ == "ProblemError":
                raise self.fail("bad_problem", str(exc))
            raise self.fail("bad_problem", f"{self.problem.path}: building the reference failed: {_short_traceback(exc, str(self.problem.path))}")
        try:
            self.run_reference(self.copy_args(self.warm_inputs))
        except Exception as exc:
            raise self.fail("bad_problem", f"{self.problem.path}: Model.forward raised on get_inputs(): {_short_traceback(exc, str(self.problem.path))}")
        if req.backend == "triton":
            try:
                import triton  # noqa: F401
            except ImportError as exc:  # say what is missing: Triton itself, or numpy for its CPU interpreter
                raise self.fail("compile_error", f"Triton cannot be imported here ({type(exc).__name__}: {exc}); "
                                "install it with `pip install triton numpy`")
        self.inputs_s = 0.0  # from here on: input sets made while verifying and timing
        self.end_stage()

    def compile(self) -> None:
        self.stage("compile")
        torch = self.torch
        from kernelskill.problem import load_module
        from kernelskill.review.cuda import CudaCompileError, inline

        req = self.req
        self.cand_file = req.candidate_path or "<candidate>"
        start = time.perf_counter()
        checked_only = req.backend == "cuda" and self.device.type == "cpu"
        builds_before = len(inline.BUILDS)
        threads = set(threading.enumerate())
        try:
            module = load_module(req.candidate_source, self.cand_file, "kernelskill_candidate")
        except CudaCompileError as exc:
            raise self.fail("compile_error", str(exc), compile_errors=exc.log)
        except Exception as exc:
            detail = _short_traceback(exc, self.cand_file)
            if "Error building extension" in str(exc):  # torch's message leads with command lines: lead with errors
                from kernelskill.review.logs import compiler_errors, trim_log

                raise self.fail("compile_error", "the CUDA extension failed to build:\n" + compiler_errors(str(exc)),
                                compile_errors=trim_log(str(exc)))
            raise self.fail("compile_error", "the candidate failed to build or import:\n" + detail, compile_errors=detail)
        model_new = getattr(module, "ModelNew", None)
        if not isinstance(model_new, type) or not issubclass(model_new, torch.nn.Module):
            raise self.fail("bad_candidate", f"{self.cand_file}: `ModelNew` must be an nn.Module subclass")
        try:
            torch.manual_seed(req.seeds.init)
            self.cand_model = model_new(*self.init_inputs).to(self.device)
        except Exception as exc:
            detail = _short_traceback(exc, self.cand_file)
            raise self.fail("compile_error", "ModelNew(*get_init_inputs()) raised:\n" + detail, compile_errors=detail)
        self.check_threads(threads)
        compile_info = {"ok": True, "backend": req.backend, "checked_only": checked_only}
        builds = inline.BUILDS[builds_before:]  # what the extension builder did: cache hits, steps, warnings
        if checked_only:
            compile_info["warnings"] = [w for b in builds for w in b.warnings]
            compile_info["builds"] = [{k: b.to_dict()[k] for k in ("name", "cache_hit", "seconds", "cuda_variant",
                                                                   "notes")} for b in builds]
            compile_info["duration_s"] = round(time.perf_counter() - start, 3)
            self.update(compiled=True, compile=compile_info, flags=["cuda_not_run_on_cpu"])
            self.end_stage()
            return
        compile_info["duration_s"] = round(time.perf_counter() - start, 3)
        if builds:
            compile_info["builds"] = [{k: b.to_dict()[k] for k in ("name", "cache_hit", "seconds", "steps", "pch_used",
                                                                   "cuda_variant", "notes")} for b in builds]
            compile_info["warnings"] = [w for b in builds for w in b.warnings]
        self.compile_info = compile_info
        self.update(compiled=True, compile=compile_info)
        self.end_stage()

    def first_run(self) -> None:
        """Triton compiles at the first launch: one call on unrelated inputs builds every kernel.

        It runs under the verify stage's time limit (a forward that hangs is a verify failure), but a compilation
        error it raises is reported as the compile failure it is.
        """
        torch = self.torch
        compile_info = self.compile_info
        start = time.perf_counter()
        threads = set(threading.enumerate())
        try:
            with torch.no_grad():
                self.cand_model(*self.copy_args(self.warm_inputs))
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        except Exception as exc:
            if "CompilationError" in type(exc).__name__ or type(exc).__module__.startswith("triton.compiler"):
                detail = _short_traceback(exc, self.cand_file)
                self.stage_name = "compile"
                raise self.fail("compile_error", "Triton failed to compile a kernel:\n" + detail, compile_errors=detail)
            self.update(compiled=True, compile=compile_info)
            if _is_cuda_fatal(exc):
                raise self.fail("crash", f"CUDA error on the first run: {_short_traceback(exc, self.cand_file)}")
            raise self.fail("runtime_error", "the candidate raised on its first run:\n" + _short_traceback(exc, self.cand_file))
        compile_info["first_call_s"] = round(time.perf_counter() - start, 3)
        self.update(compiled=True, compile=compile_info)
        self.check_threads(threads)
        self.check_integrity()

    def copy_parameters(self) -> list[str]:
        """Copy parameters and buffers whose names, shapes and dtypes match, and whose values differ, from Model into
        ModelNew; returns their names (empty: copying would change nothing)."""
        ref_state = self.ref_model.state_dict()
        copied = []
        with self.torch.no_grad():
            for name, value in self.cand_model.state_dict().items():
                src = ref_state.get(name)
                if (src is not None and src.shape == value.shape and src.dtype == value.dtype
                        and not self.torch.equal(src, value)):
                    value.copy_(src)
                    copied.append(name)
        return copied

    def candidate_first(self) -> bool:
        order = self.settings.order
        return order == "candidate_first" or (order == "random" and self.rng.random() < 0.5)

    def poison(self) -> None:
        if self.device.type == "cuda" and self.guards.poison_freed_memory:
            from kernelskill.review.guards import poison_free_cuda_memory

            poison_free_cuda_memory(self.device)

    def one_trial(self, index: int, seed: int, cand_first: bool, profile: bool) -> tuple:
        """Run reference and candidate on fresh inputs; returns (comparison, reference output)."""
        from kernelskill.review.compare import compare_outputs
        from kernelskill.review.guards import output_problem

        torch = self.torch
        inputs = self.make_inputs(seed)
        ref_args = self.copy_args(inputs)
        cand_args = self.copy_args(inputs) if self.guards.clone_inputs else ref_args

        def reference():
            with self.ref_trace if index == 0 else _null():
                out = self.run_reference(ref_args)
            # Keep a copy and free the original: its memory is what a cheating candidate would try to get back.
            kept = _map_tensors(out, lambda t: t.detach().clone())
            del out
            return kept

        def candidate():
            self.poison()
            self.tracker.trace = self.cand_trace
            try:
                with self.cand_trace:
                    if profile:
                        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                            out = self.run_candidate(cand_args)
                        self.profiled.update(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
                    else:
                        out = self.run_candidate(cand_args)
            finally:
                self.tracker.trace = None
            return out

        if cand_first:
            cand_out = candidate()
            ref_out = reference()
        else:
            ref_out = reference()
            cand_out = candidate()
        self.check_integrity()
        if self.guards.output_types:
            problem = output_problem(cand_out, self.device)
            if problem:
                raise self.reject("runtime:output-type", problem)
        if self.guards.clone_inputs and _changed(inputs, cand_args):
            self.flags.add("candidate_mutates_inputs")
        return compare_outputs(ref_out, cand_out, self.settings.atol, self.settings.rtol, index), ref_out

    def verify(self) -> None:
        """All trials, with ModelNew's parameters as its own __init__ made them after Model's seed (KernelBench's
        protocol: a candidate may derive its weights from that initialization). If a trial fails and Model has
        parameters of the same names and shapes with other values, they are copied in and all trials run again:
        a candidate that only creates its parameters in another order than Model is not failed for that."""
        self.stage("verify")
        from kernelskill.review.guards import OpTrace

        self.first_run()
        self.ref_trace, self.cand_trace = OpTrace(), OpTrace()
        self.profiled: set[str] = set()
        self.flags: set[str] = set()
        self.tracker.launches.clear()  # count only launches made while verifying, not the compile warm-up
        failure = self.trials()
        weights = "same_seed"
        if failure is not None:
            copied = self.copy_parameters()
            if copied:
                first = failure
                weights = "copied_by_name"
                failure = self.trials()
                if failure is not None:
                    failure = (failure[0] + f" (with Model's parameters copied by name: {', '.join(copied[:6])}"
                               + (" ..." if len(copied) > 6 else "") + f"; with its own: {first[0]})", *failure[1:])
        self.update(weights=weights)
        if failure is not None:
            error, verify, worst_abs, worst_rel = failure
            self.update(verify=verify)
            raise self.fail("mismatch", error, max_abs_error=worst_abs, max_rel_error=worst_rel)
        self.kernel_policy()
        self.note_backend_flags()
        self.update(flags=sorted(self.flags))
        self.end_stage()

    def trials(self) -> tuple | None:
        """Run every verify trial; None when all pass, else (error, verify record, max abs, max rel error)."""
        seeds = self.req.seeds
        trials = self.settings.trials
        worst_abs = worst_rel = 0.0
        ref_outputs = []
        for i in range(trials):
            profile = self.device.type == "cuda" and i == seeds.profile_trial % trials
            cmp, ref_out = self.one_trial(i, seeds.trials[i], self.candidate_first(), profile)
            worst_abs, worst_rel = max(worst_abs, cmp.max_abs_error), max(worst_rel, cmp.max_rel_error)
            if not cmp.ok:
                return (f"trial {i + 1} of {trials}: {cmp.mismatch.reason}",
                        _verify_dict(False, i, i, self.settings, worst_abs, worst_rel, cmp.mismatch), worst_abs, worst_rel)
            ref_outputs.append(_map_tensors(ref_out, lambda t: t.detach().flatten()[:4096].cpu()))
        self.update(verify=_verify_dict(True, trials, trials, self.settings, worst_abs, worst_rel, None),
                    max_abs_error=worst_abs, max_rel_error=worst_rel)
        self.flags.update(_degenerate(ref_outputs, self.settings.atol, self.torch))
        return None

    def note_backend_flags(self) -> None:
        """Global switches the candidate flipped (the reference ran under them too, as in KernelBench's harness)."""
        from kernelskill.review.guards import changed_backend_flags

        changed = changed_backend_flags(self.session.backend_flags)
        if changed:
            self.flags.update(f"backend_flag_changed:{name}={value}" for name, value in changed.items())
            self.update(backend_flags_changed={k: str(v) for k, v in changed.items()})

    def kernel_policy(self) -> None:
        """The candidate must launch kernels of its own and must not simply re-run the reference's operators."""
        names = self.req.kernel_names
        own = dict(self.tracker.launches)
        for kernel in self.profiled:
            for name in names:
                if name in kernel and name not in own:
                    own[name] = own.get(name, 0) + 1
        ref_ops, cand_ops = dict(self.ref_trace.ops), dict(self.cand_trace.ops)
        self.update(kernels={"own_kernels": own, "candidate_ops": cand_ops, "reference_ops": ref_ops,
                             "profiled_kernels": sorted(self.profiled)})
        if not self.guards.kernel_policy:
            return
        if self.settings.allow_torch_ops:
            self.flags.add("torch_ops_allowed")
            return
        # Policy, not safety: the candidate is still timed; `--rules strict` turns a violation into the verdict.
        violation = None
        if not own:
            violation = {"name": "policy:no-custom-kernel",
                         "detail": "the candidate launched no kernel of its own (Triton or CUDA); it must do the work in "
                                   "its own kernels (--rules kernelbench or --allow-torch-ops accept PyTorch-only "
                                   "candidates)"}
        elif ref_ops and set(ref_ops) <= set(cand_ops):
            violation = {"name": "policy:reruns-reference-ops",
                         "detail": f"the candidate calls every PyTorch operator the reference uses "
                                   f"({', '.join(sorted(ref_ops))}) besides its own kernels, so PyTorch does the real "
                                   "work (--rules kernelbench or --allow-torch-ops accept this)"}
        if violation:
            self.update(policy_violations=[violation])

    def time(self) -> None:
        self.stage("time")
        from kernelskill.review.compare import compare_outputs
        from kernelskill.review.results import TimingStats
        from kernelskill.review.timing import TIMING_BUDGET_S, Timer, hidden_work

        torch = self.torch
        seeds = self.req.seeds
        device = self.device.type
        warmup = self.req.warmup
        iters = self.req.iters
        sets = [self.make_inputs(s) for s in seeds.timing]
        expected = [_map_tensors(self.run_reference(self.copy_args(args)), lambda t: t.detach().clone()) for args in sets]
        # The timed candidate call is the bare forward: synchronizing inside it would put the host's wake-up latency
        # (tens of microseconds, varying from process to process) into the candidate's time and not the reference's.
        # The Timer synchronizes the whole device after the stop event; the checks run after that, untimed.
        fns = {"reference": lambda *a: self.run_reference(list(a)), "candidate": lambda *a: self.call_candidate(list(a))}
        threads = set(threading.enumerate())

        def after_call(name: str) -> None:
            nonlocal threads
            if name == "candidate":
                self.sync_after_candidate()
                self.check_threads(threads)
            else:  # threads the harness's own callables start (torch.compile's workers) are not the candidate's
                threads = set(threading.enumerate())

        if self.settings.baseline == "compile":
            compiled = torch.compile(self.ref_model)

            def run_compiled(*args):
                with torch.no_grad():
                    return compiled(*args)

            fns["compiled_reference"] = run_compiled
        timer = Timer(self.device, device_sync=self.guards.device_sync, poison=self.poison, after_call=after_call)
        try:
            samples, synced, kept = timer.run(fns, sets, warmup, iters,
                                              keep_last=len(sets) if self.guards.timed_outputs else 0)
        except Verdict:
            raise
        except Exception as exc:  # an asynchronous CUDA error surfacing at the timer's synchronization
            if _is_cuda_fatal(exc):
                raise self.fail("crash", f"CUDA error while timing the candidate: {type(exc).__name__}: {exc}")
            raise
        hidden = self.guards.device_sync and device == "cuda" and hidden_work(
            samples["candidate"], synced["candidate"], samples["reference"], synced["reference"])
        if hidden:
            samples = synced
            self.flags.add("work_outside_current_stream")
        self.check_integrity()
        for k, out in kept["candidate"]:
            cmp = compare_outputs(expected[k], out, self.settings.atol, self.settings.rtol, -1)
            if not cmp.ok and _marginal(cmp):
                # a few elements at the tolerance's edge (a reduction's order varying from call to call), not a
                # result computed for other inputs, which misses in nearly every element
                self.flags.add(f"timed_outputs_marginal: {cmp.mismatch.reason}")
            elif not cmp.ok:
                raise self.reject("runtime:timed-outputs",
                                  f"outputs of timed calls differ from the reference ({cmp.mismatch.reason}); results "
                                  "must be computed on every call, not cached across calls")
        stats = {name: TimingStats.from_samples(v) for name, v in samples.items()}
        ref, cand = stats["reference"], stats["candidate"]
        timed = len(samples["candidate"])
        cut = (f" (cut from {iters}: the calls are too slow for {iters} within the timed loop's "
               f"{TIMING_BUDGET_S:.0f} s)" if timed < iters else "")
        if cut:
            self.flags.add("timing_calls_cut")
        timing = {
            "clock": "cuda_events" if device == "cuda" else "cpu_perf_counter",
            "method": (
                f"up to {warmup} warm-up + {timed} timed calls each{cut}, interleaved in blocks of 10; before each "
                f"call one of "
                f"{len(sets)} input sets is copied into one of 2 fixed input buffers and "
                + (("the L2 cache is flushed (256 MB zeroed); CUDA events on the current stream"
                    + ("; the candidate left work running past its stop event, so all callables are timed until the "
                       "device is idle" if hidden else ", checked against device-wide idle time")
                    if self.guards.device_sync else ", no device-wide check")
                   if device == "cuda" else "a 32 MB buffer is zeroed; CPU wall clock (not a GPU timing)")
            ),
            "warmup": warmup,
            "iters": timed,
            "reference": ref.model_dump(),
            "candidate": cand.model_dump(),
            "speedup": ref.mean_ms / cand.mean_ms,
            "speedup_median": ref.median_ms / cand.median_ms,
        }
        update = {"ref_ms": ref.mean_ms, "candidate_ms": cand.mean_ms, "speedup": timing["speedup"]}
        if "compiled_reference" in stats:
            comp = stats["compiled_reference"]
            timing["compiled_reference"] = comp.model_dump()
            timing["speedup_vs_compile"] = comp.mean_ms / cand.mean_ms
            update.update(compile_ms=comp.mean_ms, speedup_vs_compile=timing["speedup_vs_compile"])
        self.update(timing=timing, flags=sorted(self.flags), **update)
        if timing["speedup"] > self.settings.reverify_above:
            self.reverify(timing["speedup"])
        self.end_stage()

    def reverify(self, speedup: float) -> None:
        """Suspiciously large speedups get many more trials on fresh inputs before they are believed."""
        seeds = self.req.seeds.reverify
        for i, seed in enumerate(seeds):
            cmp, _ = self.one_trial(1000 + i, seed, self.candidate_first(), False)
            if not cmp.ok:
                self.flags.add(f"speedup_over_{self.settings.reverify_above:g}x_reverify_failed")
                raise self.fail("mismatch", f"speedup {speedup:.1f}x re-verified: extra trial {i + 1} of {len(seeds)} failed: "
                                f"{cmp.mismatch.reason}")
        self.flags.add(f"speedup_over_{self.settings.reverify_above:g}x_reverified")
        self.update(flags=sorted(self.flags))

    def build_only(self) -> None:
        """Prebuild (no GPU here): run the candidate's module code with load_inline building into the shared cache.

        The extensions it returns cannot run (nothing is loaded); module code that calls them at import time ends
        the prebuild early, and the review on the GPU builds what is left.
        """
        self.stage("compile")
        from kernelskill.problem import load_module
        from kernelskill.review.cuda import CudaCompileError, inline

        req = self.req
        self.cand_file = req.candidate_path or "<candidate>"
        before = len(inline.BUILDS)
        try:
            # the stand-in pauses construct_for_builds' alarm while it builds
            with inline.installed("build", arch=req.arch), _pretend_gpu(self.torch, req.arch):
                module = load_module(req.candidate_source, self.cand_file, "kernelskill_candidate")
                self.construct_for_builds(module)
        except CudaCompileError as exc:
            raise self.fail("compile_error", str(exc), compile_errors=exc.log)
        except Exception as exc:  # noqa: BLE001 - not a verdict: the review runs the module for real
            self.update(prebuild_stopped=_short_traceback(exc, self.cand_file))
        self.update(prebuild=[{"name": b.name, "failed_outside_own_code": b.failed} if b.failed else
                              {"name": b.name, "cache_hit": b.cache_hit, "seconds": round(b.seconds, 3),
                               "steps": b.steps} for b in inline.BUILDS[before:]])
        self.end_stage()

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
        problem = _problem_of(self.req)
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

    def run(self) -> None:
        if self.req.mode == "build":
            self.build_only()
            return
        self.load()
        self.compile()
        if self.req.backend == "cuda" and self.device.type == "cpu":
            return
        self.verify()
        if self.settings.timing:
            self.time()


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


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _problem_of(request: ReviewRequest):
    """The problem a request names, from the source the caller read (the worker does not read the file again)."""
    from kernelskill.problem import Problem

    path = Path(request.problem_path)
    return Problem(path=path, source=request.problem_source, name=path.stem)


# Threads whose code lives in these packages are compiler infrastructure (torch.compile's compile workers and their
# progress bar's monitor), started by a candidate that calls torch.compile; they compute nothing of its output.
LIBRARY_THREAD_PACKAGES = ("torch._inductor", "torch._dynamo", "tqdm")  # CUDA-L1 L2/34: torch.compile


def _compile_worker_thread(thread) -> bool:
    """Whether a thread runs code from a file of LIBRARY_THREAD_PACKAGES (the code's file, not a `__module__` a
    candidate could set)."""
    import importlib.util

    fn = thread._target if type(thread) is threading.Thread else type(thread).run
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return False
    for name in LIBRARY_THREAD_PACKAGES:
        spec = importlib.util.find_spec(name) if name.split(".")[0] in sys.modules else None
        folders = list(spec.submodule_search_locations or []) if spec else []
        if any(code.co_filename.startswith(os.path.join(folder, "")) for folder in folders):
            return True
    return False


MARGINAL_FRACTION = 1e-3  # at most this share of a timed output's elements outside the tolerance: not a stale result


def _marginal(cmp) -> bool:
    m = cmp.mismatch
    return (m is not None and m.mismatched <= MARGINAL_FRACTION * m.total
            and cmp.max_abs_error != float("inf") and cmp.max_abs_error == cmp.max_abs_error)


def _map_tensors(out, fn):
    import torch

    if isinstance(out, torch.Tensor):
        return fn(out)
    if isinstance(out, (tuple, list)):
        return type(out)(_map_tensors(o, fn) for o in out)
    return out


def _changed(before: list, after: list) -> bool:
    import torch

    for a, b in zip(before, after):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.data_ptr() != b.data_ptr():
            if a.shape != b.shape or not torch.equal(a, b):
                return True
    return False


def _verify_dict(ok, trials, passed, settings, max_abs, max_rel, mismatch) -> dict:
    return {
        "ok": ok, "trials": trials, "passed": passed, "atol": settings.atol, "rtol": settings.rtol,
        "max_abs_error": max_abs, "max_rel_error": max_rel,
        "mismatch": mismatch.model_dump() if mismatch is not None else None,
    }


def _degenerate(ref_outputs: list, atol: float, torch) -> set[str]:
    """Flags for a reference whose output is (near) zero, constant, or the same for every input."""
    from kernelskill.review.compare import flatten_outputs

    trials = [[t.double() for t in flatten_outputs(o) if isinstance(t, torch.Tensor) and t.numel()] for o in ref_outputs]
    tensors = [t for trial in trials for t in trial]
    if not tensors:
        return set()
    flags = set()
    if all(float(t.abs().max()) <= atol for t in tensors):
        flags.add("degenerate_reference:near_zero")
    elif all(float(t.max() - t.min()) <= atol for t in tensors):
        flags.add("degenerate_reference:constant")
    elif len(trials) > 1 and all(
        len(trial) == len(trials[0]) and all(a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=0) for a, b in zip(trial, trials[0]))
        for trial in trials[1:]
    ):
        flags.add("degenerate_reference:input_independent")
    return flags


def _bind_to_parent(parent: int) -> None:
    """No core dumps, and die with the reviewer that started us (a killed reviewer leaves no hung worker behind).

    Done here rather than in a preexec_fn, which is unsafe when the parent runs threads (as a benchmark does).
    """
    import resource
    import signal

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux/glibc: the parent's own cleanup still kills the group
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _log_to(path: str) -> None:
    """Point stdout and stderr (ours, the candidate's, compilers') at this review's log file."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _log_to_fd(fds) -> None:
    """Point stdout and stderr at the log file the parent sent over `fds` (the sandbox cannot open log folders)."""
    import socket

    _, received, _, _ = socket.recv_fds(fds, 1, 1)
    sys.stdout.flush()
    sys.stderr.flush()
    for fd in received[:1]:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    for fd in received:
        os.close(fd)


def serve(channel: Channel, session: Session, request: ReviewRequest, fds=None, sandbox: dict | None = None) -> None:
    """One review, start to end; always ends with a "done" message saying whether this process may serve again."""
    from kernelskill.review import confine

    if request.log_fd and fds is not None:
        _log_to_fd(fds)
    else:
        _log_to(request.log_path)
    print(f"[kernelskill] sandbox: {confine.describe(sandbox or {})}", file=sys.stderr, flush=True)
    confine.remember_sources([(str(Path(request.problem_path)), request.problem_source),
                              (request.candidate_path or "<candidate>", request.candidate_source)])
    worker = Worker(request, channel, session)
    kind = None
    try:
        worker.run()
    except Verdict as verdict:
        kind = verdict.message.kind
        channel.send(verdict.message)
        if hasattr(worker, "flags"):
            channel.send(UpdateMessage(data=StageResults(flags=sorted(worker.flags))))
    except BaseException as exc:  # a bug in the harness, or something the candidate broke in it: report, never hide
        kind = "crash"
        traceback.print_exc()
        channel.send(VerdictMessage(stage=worker.stage_name, kind="crash",
                                    error=f"review worker error in stage {worker.stage_name}: {type(exc).__name__}: {exc}"))
    if worker.inputs_s:
        channel.send(StageSecondsMessage(stage="inputs", seconds=round(worker.inputs_s, 3)))
    unfit = ["the review ended in a crash"] if kind == "crash" else []
    try:
        del worker
        session.clean_up()
        unfit += session.fit()
    except BaseException as exc:  # noqa: BLE001 - a process that cannot clean up is not used again
        unfit.append(f"clean-up failed: {type(exc).__name__}: {exc}")
    sys.stdout.flush()
    sys.stderr.flush()
    channel.send(DoneMessage(reusable=not unfit, unfit=unfit))


def main() -> None:
    import socket

    from kernelskill.review import confine

    sandbox = confine.apply()  # first, while this process is single-threaded (it drops root: before the next line)
    _bind_to_parent(int(sys.argv[2]))
    channel = Channel(int(sys.argv[1]))
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    fds = socket.socket(fileno=int(sys.argv[4])) if len(sys.argv) > 4 else None
    start = time.perf_counter()
    try:
        session = Session(device)
    except BaseException as exc:  # the first request gets the reason as its verdict
        traceback.print_exc()
        try:
            request = ReviewRequest.model_validate_json(sys.stdin.readline())
        except ValueError:  # no request (the parent is gone) or not one: nowhere to log to
            request = None
        if request is not None and request.log_fd and fds is not None:
            _log_to_fd(fds)
            traceback.print_exception(exc)
        elif request is not None and request.log_path:
            _log_to(request.log_path)
            traceback.print_exception(exc)
        channel.send(StageMessage(stage="load"))
        channel.send(VerdictMessage(stage="load", kind="crash",
                                    error=f"the review worker could not start: {type(exc).__name__}: {exc}"))
        channel.send(DoneMessage(reusable=False, unfit=["start-up failed"]))
        os._exit(0)
    channel.send(ReadyMessage(seconds=round(time.perf_counter() - start, 3), device_name=session.device_name,
                              capability=session.capability, sandbox=sandbox))
    for line in sys.stdin:  # the parent closes stdin (or dies) to end us
        if line.strip():
            serve(channel, session, ReviewRequest.model_validate_json(line), fds, sandbox)
    os._exit(0)  # skip interpreter teardown: a candidate's broken state must not turn a verdict into a crash


if __name__ == "__main__":
    main()
