"""Profile a candidate on the GPU: Nsight Compute metrics and PyTorch-profiler run features of one forward.

A small driver program is written to a scratch directory. It imports the problem file and the candidate file,
builds `Model` and `ModelNew` with `get_init_inputs()`, copies the reference's parameters and buffers into the
candidate where name and shape match (so both compute with the same weights), moves the candidate and the inputs
to the GPU and runs warm-up forwards (Triton compiles, caches fill) before anything is measured. It is run twice:

1. `python driver.py profile OUT` - a plain run: the mean wall time of one forward (CUDA events) and, under the
   PyTorch profiler, every kernel launched by the forwards with its count and GPU time -> OUT (JSON, the
   ProfilerSummary of evidence.py).
2. `ncu --set full --clock-control none --profile-from-start off ... python driver.py ncu` - the warm-up forwards
   run outside the profiled range; one forward runs between `torch.cuda.cudart().cudaProfilerStart()` and
   `cudaProfilerStop()`, so ncu sees exactly the launches of one warm forward. The report is then exported with
   `ncu --import REPORT --csv --page raw` and parsed by ncu.py (the same commands as scripts/capture_ncu.py).

Every step runs in its own process group with a time limit (a timeout kills ncu and the program it started and
their descendants). The driver confines itself first thing, as a review worker does (review/confine.py: allowlisted
environment, no network, Landlock, not root): it may read the problem and the candidate and write its work folder.
Under ncu it shares a new network namespace with ncu alone (ncu talks to the program it profiles over loopback) and
stays root where the GPU lets only root read its counters. When ncu is missing, not permitted to read the
counters (ERR_NVGPUCTRPERM), times out or fails, the result says so in plain words and the evidence that could be
gathered (the profiler run, the code) is still returned: the policy then decides on what remains.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from kernelskill.errors import KernelSkillError
from kernelskill.memory.evidence import NcuStatus, ProfilerSummary
from kernelskill.memory.ncu import NcuReport, parse_ncu_csv

# Environment variables whose names look like credentials never reach the profiled program (or ncu).

# Exit codes of the driver (anything else: the interpreter or CUDA died).
EXIT_SETUP = 2  # the problem or the candidate failed to import, build or run
EXIT_PROFILER = 3  # the model ran, but the PyTorch profiler failed
EXIT_NO_GPU = 4  # PyTorch sees no CUDA device

DRIVER_NAME = "kernelskill_profile_driver.py"


@dataclass(frozen=True)
class ProfileSettings:
    ncu: str = "ncu"  # executable name (looked up on PATH) or path
    python: str = sys.executable  # the interpreter that runs the driver (needs torch, and triton for Triton code)
    run_timeout_s: float = 120.0  # the plain run with the PyTorch profiler
    ncu_timeout_s: float = 300.0  # ncu's profiling run, then the export (whatever is left of it)
    warmup_forwards: int = 3
    profiled_forwards: int = 10  # forwards timed and recorded by the PyTorch profiler
    max_kernel_launches: int = 64  # ncu --launch-count: a cap on the launches ncu profiles in the measured forward
    keep_dir: Path | None = None  # write the driver, logs, report and CSV here (kept); None: a temporary directory
    env: dict[str, str] | None = None  # extra environment for the driver and ncu, e.g. CUDA_VISIBLE_DEVICES
    sandbox: object | None = None  # settings.Sandbox for the driver; None: from KERNELSKILL_SANDBOX (all layers on)


@dataclass
class StepResult:
    command: list[str]
    returncode: int | None  # None: killed at its time limit
    seconds: float
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return f"{self.stdout}\n{self.stderr}"


@dataclass
class ProfileRun:
    """What profiling produced; each part may be missing, with the reason in its note."""

    ncu_status: NcuStatus = "failed"
    ncu_note: str | None = None
    ncu_report: NcuReport | None = None
    profiler: ProfilerSummary | None = None
    profiler_note: str | None = None
    workdir: Path | None = None  # kept only with ProfileSettings.keep_dir
    log: list[str] = field(default_factory=list)  # how the evidence was gathered (commands, times, outcomes)
    sandbox: dict[str, dict] = field(default_factory=dict)  # step -> the driver's sandbox layers (confine.apply)


# ---- the driver ------------------------------------------------------------------------------------------------------

_DRIVER = '''"""Profiling driver written by kernelskill.memory.profiling.

python THIS.py ncu           {warmup} warm-up forwards, then one forward between cudaProfilerStart/Stop (under ncu)
python THIS.py profile OUT   mean forward time and the PyTorch profiler's kernels over {profiled} forwards -> OUT
python THIS.py check OUT     build, copy parameters, compare one forward with Model's on any device -> OUT
"""
import importlib.util
import json
import os
import sys
import tempfile
import traceback

if __name__ == "__main__":  # first, before torch starts threads: the sandbox a review worker gets
    try:
        from kernelskill.review.confine import apply as _confine
    except ImportError:
        _confine = dict
    print("kernelskill-driver: sandbox: " + json.dumps(_confine()), file=sys.stderr, flush=True)

PROBLEM = {problem!r}
CANDIDATE = {candidate!r}
WARMUP_FORWARDS = {warmup}
PROFILED_FORWARDS = {profiled}
SEED = 0
EXIT_SETUP = {exit_setup}
EXIT_PROFILER = {exit_profiler}
EXIT_NO_GPU = {exit_no_gpu}


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)  # from the file itself: Triton reads kernel sources with inspect
    return module


def _to(value, device):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def _build(device, keep_reference=False):
    """ModelNew with Model's parameters (where name and shape match), and the inputs, on `device`."""
    import torch

    problem = _load(PROBLEM, "kernelskill_profiled_problem")
    candidate = _load(CANDIDATE, "kernelskill_profiled_candidate")
    init = list(problem.get_init_inputs())
    torch.manual_seed(SEED)
    reference = problem.Model(*init)
    torch.manual_seed(SEED)
    model = candidate.ModelNew(*init)
    ref_state = reference.state_dict()
    copied, kept = [], []
    with torch.no_grad():
        for name, value in model.state_dict().items():
            source = ref_state.get(name)
            if source is not None and tuple(source.shape) == tuple(value.shape):
                value.copy_(source)
                copied.append(name)
            else:
                kept.append(name)
    del ref_state
    reference = reference.to(device) if keep_reference else None
    model = model.to(device)
    torch.manual_seed(SEED)
    inputs = _to(list(problem.get_inputs()), device)
    return model, reference, inputs, copied, kept


def _max_abs_diff(a, b):
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape:
            return None
        return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        diffs = [_max_abs_diff(x, y) for x, y in zip(a, b)]
        return None if None in diffs else max(diffs, default=0.0)
    return None


def _describe(out):
    import torch

    if isinstance(out, torch.Tensor):
        return {{"shape": list(out.shape), "dtype": str(out.dtype), "device": str(out.device)}}
    if isinstance(out, (list, tuple)):
        return [_describe(o) for o in out]
    return repr(out)[:200]


def _kernels(prof):
    # The Chrome trace is the export that stays stable across PyTorch versions: GPU kernels have "cat": "kernel".
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    kernels = {{}}
    for event in trace.get("traceEvents", []):
        if str(event.get("cat", "")).lower() == "kernel" and "dur" in event:
            entry = kernels.setdefault(event["name"], {{"name": event["name"], "count": 0, "total_time_us": 0.0}})
            entry["count"] += 1
            entry["total_time_us"] += float(event["dur"])
    return sorted(kernels.values(), key=lambda k: -k["total_time_us"])


def _main(argv):
    mode = argv[1]
    try:
        import torch

        if mode == "check":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif torch.cuda.is_available():
            device = "cuda"
        else:
            print("kernelskill-driver: no CUDA device is visible to PyTorch", file=sys.stderr)
            return EXIT_NO_GPU
        model, reference, inputs, copied, kept = _build(device, keep_reference=mode == "check")
        print(f"kernelskill-driver: copied {{len(copied)}} parameter(s)/buffer(s) from Model, kept "
              f"{{len(kept)}} of ModelNew's own", file=sys.stderr)
        with torch.no_grad():
            if mode == "check":
                out = model(*inputs)
                expected = reference(*inputs)
                with open(argv[2], "w") as f:
                    json.dump({{"device": device, "copied": copied, "kept": kept, "output": _describe(out),
                               "max_abs_diff": _max_abs_diff(out, expected)}}, f)
                return 0
            for _ in range(WARMUP_FORWARDS):
                model(*inputs)
            torch.cuda.synchronize()
            if mode == "ncu":
                torch.cuda.cudart().cudaProfilerStart()
                model(*inputs)
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStop()
                return 0
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(PROFILED_FORWARDS):
                model(*inputs)
            end.record()
            torch.cuda.synchronize()
            forward_time_us = start.elapsed_time(end) * 1000.0 / PROFILED_FORWARDS
    except Exception:
        traceback.print_exc()
        return EXIT_SETUP
    try:
        from torch.profiler import ProfilerActivity, profile

        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILED_FORWARDS):
                model(*inputs)
            torch.cuda.synchronize()
        summary = {{"source": "torch.profiler", "forwards": PROFILED_FORWARDS, "forward_time_us": forward_time_us,
                    "kernels": _kernels(prof)}}
        with open(argv[2], "w") as f:
            json.dump(summary, f, indent=2)
    except Exception:
        traceback.print_exc()
        return EXIT_PROFILER
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
'''


def driver_source(problem: Path, candidate: Path, warmup_forwards: int = 3, profiled_forwards: int = 10) -> str:
    """The driver program for one (problem, candidate) pair; paths are made absolute."""
    if warmup_forwards < 1 or profiled_forwards < 1:
        raise ValueError("warm-up and profiled forwards must be at least 1")
    return _DRIVER.format(problem=str(Path(problem).resolve()), candidate=str(Path(candidate).resolve()),
                          warmup=warmup_forwards, profiled=profiled_forwards, exit_setup=EXIT_SETUP,
                          exit_profiler=EXIT_PROFILER, exit_no_gpu=EXIT_NO_GPU)  # fmt: skip


# ---- commands --------------------------------------------------------------------------------------------------------


def ncu_profile_command(ncu: str, python: str, driver: Path, report: Path, launch_count: int) -> list[str]:
    """ncu on the driver's measured forward, as scripts/capture_ncu.py captures its scenarios."""
    return [ncu, "--set", "full", "--clock-control", "none", "--target-processes", "all",
            "--profile-from-start", "off", "--launch-count", str(launch_count), "--force-overwrite",
            "--export", str(report), python, str(driver), "ncu"]  # fmt: skip


def ncu_import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw"]


def clean_environment(extra: dict[str, str] | None = None, sandbox=None, mode: str = "driver",
                      read: list[str] | None = None, write: list[str] | None = None) -> dict[str, str]:
    """The review worker's environment and sandbox (allowlisted variables, unbuffered Python): profiling runs the
    same untrusted candidate code. `mode` "ncu-target" for the driver ncu starts."""
    from kernelskill.review.confine import environment
    from kernelskill.settings import Sandbox

    return environment(extra, False, sandbox or Sandbox.from_env(), mode=mode, read=read, write=write)


_SANDBOX_LINE = re.compile(r"^kernelskill-driver: sandbox: (\{.*\})$", re.MULTILINE)


def _sandbox_of(step: StepResult) -> dict:
    match = _SANDBOX_LINE.search(step.stderr)
    try:
        return json.loads(match.group(1)) if match else {}
    except json.JSONDecodeError:
        return {}


def run_step(command: list[str], timeout: float, cwd: Path, env: dict[str, str]) -> StepResult:
    """Run a command in its own process group; at the time limit the whole group is killed."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True)  # fmt: skip
    except OSError as exc:
        return StepResult(command, 127, time.monotonic() - start, "", f"cannot start {command[0]!r}: {exc}")
    try:
        out, err = proc.communicate(timeout=max(timeout, 1.0))
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        from kernelskill.review.sandbox import kill_tree

        kill_tree(proc.pid)  # its group and descendants that started sessions of their own
        out, err = proc.communicate()
        code = None
    return StepResult(command, code, time.monotonic() - start, out, err)


def find_ncu(ncu: str) -> str | None:
    found = shutil.which(ncu)
    if found:
        return found
    return ncu if os.sep in ncu and Path(ncu).is_file() and os.access(ncu, os.X_OK) else None


def _tail(text: str, lines: int = 12) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return "\n".join(kept)


def _error_lines(text: str) -> str:
    errors = [line.strip() for line in text.splitlines() if "==ERROR==" in line]
    return "; ".join(errors) if errors else _tail(text, 6)


PERMISSION_HINT = (
    "ncu is not permitted to read the GPU performance counters (ERR_NVGPUCTRPERM): run it as root or with "
    "CAP_SYS_ADMIN, or load the driver with NVreg_RestrictProfilingToAdminUsers=0 "
    "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)


def classify_ncu_failure(step: StepResult, timeout: float) -> tuple[NcuStatus, str] | None:
    """None when ncu's profiling run succeeded, else (status, a note saying what went wrong)."""
    output = step.output
    if step.returncode is None:
        return "timed_out", (f"ncu did not finish within {timeout:.0f} s and was stopped (--set full replays each "
                             "kernel ~40 times; raise the ncu time limit or profile fewer launches)")  # fmt: skip
    if "ERR_NVGPUCTRPERM" in output:
        return "not_permitted", PERMISSION_HINT
    if step.returncode == 127 and not step.stdout and step.stderr.startswith("cannot start"):
        return "missing", step.stderr
    if step.returncode == EXIT_SETUP and "==ERROR==" not in output:
        return "failed", f"the candidate failed under ncu (exit {EXIT_SETUP}): {_tail(step.stderr or step.stdout, 6)}"
    if step.returncode != 0 or "==ERROR==" in output:  # ncu can exit 0 after an ==ERROR==
        return "failed", f"ncu exited with {step.returncode}: {_error_lines(output)}"
    if re.search(r"No kernels were profiled", output, flags=re.IGNORECASE):
        return "failed", "ncu profiled no kernel launch in the measured forward (==WARNING== No kernels were profiled)"
    return None


# ---- the whole run ---------------------------------------------------------------------------------------------------


def run_profile(problem: Path, candidate: Path, settings: ProfileSettings | None = None) -> ProfileRun:
    """Profile `candidate` against `problem`; never raises for a profiling failure, only for bad input files."""
    settings = settings or ProfileSettings()
    problem, candidate = Path(problem), Path(candidate)
    for label, path in (("problem", problem), ("candidate", candidate)):
        if not path.is_file():
            raise KernelSkillError(f"{path}: no such {label} file")
    if settings.keep_dir is not None:
        settings.keep_dir.mkdir(parents=True, exist_ok=True)
        return _run(problem, candidate, settings, settings.keep_dir, keep=True)
    with tempfile.TemporaryDirectory(prefix="kernelskill_profile_") as tmp:
        return _run(problem, candidate, settings, Path(tmp), keep=False)


def _run(problem: Path, candidate: Path, settings: ProfileSettings, work: Path, keep: bool) -> ProfileRun:
    run = ProfileRun(workdir=work if keep else None)
    driver = work / DRIVER_NAME
    driver.write_text(driver_source(problem, candidate, settings.warmup_forwards, settings.profiled_forwards))
    from kernelskill.review.confine import protect_harness, scratch_environment
    from kernelskill.settings import Sandbox

    sandbox = settings.sandbox or Sandbox.from_env()
    inputs = [str(problem.resolve()), str(candidate.resolve())]
    env, scratch = scratch_environment(clean_environment(settings.env, sandbox, read=inputs, write=[str(work)]))
    protect_harness(env)
    try:
        return _steps(run, problem, candidate, settings, work, keep, driver, env, scratch, sandbox, inputs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _steps(run: ProfileRun, problem: Path, candidate: Path, settings: ProfileSettings, work: Path, keep: bool,
           driver: Path, env: dict[str, str], scratch: Path, sandbox, inputs: list[str]) -> ProfileRun:
    from kernelskill.review.confine import describe

    def record(step: StepResult, label: str) -> None:
        outcome = "timed out" if step.returncode is None else f"exit {step.returncode}"
        run.log.append(f"{label}: `{' '.join(step.command)}` - {outcome} after {step.seconds:.1f} s")
        layers = _sandbox_of(step)
        if layers:
            run.sandbox[label] = layers
            run.log.append(f"{label}: sandbox: {describe(layers)}")
        if keep:
            name = label.replace(" ", "_")
            (work / f"{name}.log").write_text(f"$ {' '.join(step.command)}\n--- stdout ---\n{step.stdout}\n"
                                               f"--- stderr ---\n{step.stderr}")  # fmt: skip

    # 1. the plain run: does the candidate run at all, and the PyTorch profiler's view of the forward
    features = work / "run_features.json"
    step = run_step([settings.python, str(driver), "profile", str(features)], settings.run_timeout_s, work, env)
    record(step, "torch profiler")
    candidate_runs = True
    if step.returncode == 0:
        try:
            run.profiler = ProfilerSummary.model_validate(json.loads(features.read_text()))
        except (OSError, json.JSONDecodeError, ValidationError) as exc:
            run.profiler_note = f"the driver's run-features file is unreadable: {str(exc).splitlines()[0]}"
    elif step.returncode is None:
        run.profiler_note = f"the plain run did not finish within {settings.run_timeout_s:.0f} s and was stopped"
        candidate_runs = False
    elif step.returncode == EXIT_PROFILER:
        run.profiler_note = f"the PyTorch profiler failed: {_tail(step.stderr, 4)}"
    elif step.returncode == EXIT_NO_GPU:
        run.profiler_note = "no CUDA device is visible to PyTorch, so nothing was run"
        candidate_runs = False
    else:
        why = _tail(step.stderr or step.stdout, 6)
        run.profiler_note = f"the candidate did not run (exit {step.returncode}): {why}"
        candidate_runs = False

    # 2. ncu on one warm forward
    ncu = find_ncu(settings.ncu)
    if ncu is None:
        run.ncu_status = "missing"
        run.ncu_note = (f"Nsight Compute not found: {settings.ncu!r} is not on PATH or not an executable file; "
                        "install Nsight Compute (it ships with the CUDA toolkit) or pass its path")  # fmt: skip
        return run
    if not candidate_runs:
        run.ncu_status, run.ncu_note = "failed", f"ncu not run: in the plain run, {run.profiler_note}"
        return run
    report = work / "ncu_report"
    deadline = time.monotonic() + settings.ncu_timeout_s
    command = ncu_profile_command(ncu, settings.python, driver, report, settings.max_kernel_launches)
    ncu_home = str(Path(ncu).resolve().parent)
    ncu_env = {**clean_environment(settings.env, sandbox, mode="ncu-target", read=[*inputs, ncu_home],
                                   write=[str(work)]),
               **{k: env[k] for k in ("KERNELSKILL_SCRATCH", "HOME", "TMPDIR") if k in env}}
    if sandbox.network:  # ncu and the program it profiles in a network namespace of their own (loopback only)
        command = [sys.executable, "-m", "kernelskill.review.confine", "netns", "--", *command]
    step = run_step(command, settings.ncu_timeout_s, work, ncu_env)
    record(step, "ncu profile")
    failure = classify_ncu_failure(step, settings.ncu_timeout_s)
    if failure is not None:
        run.ncu_status, run.ncu_note = failure
        return run
    rep = report.with_suffix(".ncu-rep")
    if not rep.exists():
        run.ncu_status = "failed"
        run.ncu_note = f"ncu wrote no report ({rep.name}); its output: {_tail(step.output, 4)}"
        return run
    remaining = deadline - time.monotonic()
    if remaining < 1:
        run.ncu_status = "timed_out"
        run.ncu_note = f"no time left to export the ncu report (limit {settings.ncu_timeout_s:.0f} s)"
        return run
    step = run_step(ncu_import_command(ncu, rep), min(remaining, 120.0), work, env)
    record(step, "ncu import")
    if step.returncode != 0:
        run.ncu_status = "timed_out" if step.returncode is None else "failed"
        run.ncu_note = f"exporting the ncu report failed: {_error_lines(step.output)}"
        return run
    if keep:
        (work / "ncu_raw.csv").write_text(step.stdout)
    source = str(work / "ncu_raw.csv") if keep else f"ncu --page raw of {candidate.name}'s measured forward"
    try:
        run.ncu_report = parse_ncu_csv(step.stdout, source=source)
    except KernelSkillError as exc:
        run.ncu_status, run.ncu_note = "failed", f"the exported CSV could not be read: {exc}"
        return run
    run.ncu_status = "ok"
    launches = sum(k.launches for k in run.ncu_report.kernels)
    run.log.append(f"ncu profiled {launches} kernel launch(es) of one forward after {settings.warmup_forwards} "
                   "warm-up forwards")  # fmt: skip
    per_forward = (sum(k.count for k in run.profiler.kernels) / run.profiler.forwards) if run.profiler else None
    if launches >= settings.max_kernel_launches and (per_forward is None or per_forward > launches):
        run.log.append(f"the forward launches more kernels than ncu's --launch-count {settings.max_kernel_launches}; "
                       "ncu's kernel table covers only the first ones (the profiler's covers all)")  # fmt: skip
    return run
