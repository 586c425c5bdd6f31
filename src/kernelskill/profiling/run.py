"""Profile a candidate on the GPU: Nsight Compute metrics and PyTorch-profiler run features of one forward.

The driver (`profile_driver`, run as `python -m kernelskill.profiling.driver`) loads the problem and the
candidate, builds `Model` and `ModelNew` with `get_init_inputs()`, copies the reference's parameters and buffers into
the candidate where name and shape match (so both compute with the same weights), moves the candidate and the inputs
to the GPU and runs warm-up forwards (Triton compiles, caches fill) before anything is measured. It is run twice:

1. `... profile_driver profile P C --out OUT` - a plain run: the mean wall time of one forward (CUDA events) and,
   under the PyTorch profiler, every kernel launched by the forwards with its count and GPU time -> OUT (JSON, the
   ProfilerSummary of evidence.py).
2. `ncu --set full --clock-control none --profile-from-start off ... python -m ...profile_driver ncu P C` - the
   warm-up forwards run outside the profiled range; one forward runs between `torch.cuda.cudart().cudaProfilerStart()`
   and `cudaProfilerStop()`, so ncu sees exactly the launches of one warm forward. The report is then exported with
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
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from kernelskill.errors import KernelSkillError
from kernelskill.profiling.ncu import NcuReport, parse_ncu_csv
from kernelskill.profiling.summary import NcuStatus, ProfilerSummary

# Exit codes of the driver (anything else: the interpreter or CUDA died).
EXIT_SETUP = 2  # the problem or the candidate failed to import, build or run (argparse's code for bad arguments)
EXIT_PROFILER = 3  # the model ran, but the PyTorch profiler failed
EXIT_NO_GPU = 4  # PyTorch sees no CUDA device

DRIVER_MODULE = "kernelskill.profiling.driver"  # not imported here: the package imports this module
DRIVER_NAME = "profile_driver.sh"
"""Kept with the logs: the driver's two runs as they were started, to run again by hand."""


@dataclass(frozen=True)
class ProfileSettings:
    ncu: str = "ncu"  # executable name (looked up on PATH) or path
    python: str = sys.executable  # the interpreter that runs the driver (needs torch, and triton for Triton code)
    run_timeout_s: float = 120.0  # the plain run with the PyTorch profiler
    ncu_timeout_s: float = 300.0  # ncu's profiling run, then the export (whatever is left of it)
    warmup_forwards: int = 3
    profiled_forwards: int = 10  # forwards timed and recorded by the PyTorch profiler
    max_kernel_launches: int = 64  # ncu --launch-count: a cap on the launches ncu profiles in the measured forward
    keep_dir: Path | None = None  # keep the driver's commands, logs, report and CSV here; None: a temporary folder
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


# ---- commands --------------------------------------------------------------------------------------------------------


def driver_command(python: str, mode: str, problem: Path, candidate: Path, warmup_forwards: int = 3,
                   profiled_forwards: int = 10, out: Path | None = None) -> list[str]:
    """The driver's command line for one (problem, candidate) pair; paths are made absolute."""
    if warmup_forwards < 1 or profiled_forwards < 1:
        raise ValueError("warm-up and profiled forwards must be at least 1")
    command = [python, "-m", DRIVER_MODULE, mode, str(Path(problem).resolve()), str(Path(candidate).resolve()),
               "--warmup", str(warmup_forwards), "--forwards", str(profiled_forwards)]  # fmt: skip
    return command + (["--out", str(out)] if out is not None else [])


def ncu_profile_command(ncu: str, driver: list[str], report: Path, launch_count: int) -> list[str]:
    """ncu on the driver's measured forward (`driver`: its command in "ncu" mode), as scripts/capture_ncu.py
    captures its scenarios."""
    return [ncu, "--set", "full", "--clock-control", "none", "--target-processes", "all",
            "--profile-from-start", "off", "--launch-count", str(launch_count), "--force-overwrite",
            "--export", str(report), *driver]  # fmt: skip


def driver_script(commands: list[list[str]], env: dict[str, str], exported: list[str]) -> str:
    """A shell script that runs `commands` again, with the variables named in `exported` set as they were."""
    lines = ["#!/bin/sh", "# The profiling driver's runs, as kernelskill.profiling.run started them (ncu's own",
             "# command line around the second one is in ncu_profile.log).", 'cd "$(dirname "$0")"']
    lines += [f"export {name}={shlex.quote(env[name])}" for name in exported if name in env]
    return "\n".join(lines + [shlex.join(c) for c in commands]) + "\n"


def ncu_import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw"]


def clean_environment(extra: dict[str, str] | None = None, sandbox=None, mode: str = "driver",
                      read: list[str] | None = None, write: list[str] | None = None,
                      owner: str | None = None) -> dict[str, str]:
    """The review worker's environment and sandbox (allowlisted variables, unbuffered Python): profiling runs the
    same untrusted candidate code. `mode` "ncu-target" for the driver ncu starts; `owner`: the candidate's
    (review.caches.owner_key of its source), whose caches are its own, as in its review."""
    from kernelskill.review.confine import environment
    from kernelskill.settings import Sandbox

    return environment(extra, False, sandbox or Sandbox.from_env(), mode=mode, read=read, write=write, owner=owner)


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
    from kernelskill.review.confine import protect_harness, scratch_environment
    from kernelskill.settings import Sandbox

    sandbox = settings.sandbox or Sandbox.from_env()
    inputs = [str(problem.resolve()), str(candidate.resolve())]
    from kernelskill.review.caches import owner_key

    owner = owner_key(candidate.read_text())  # the caches of the candidate's reviews: its build is found there
    env, scratch = scratch_environment(clean_environment(settings.env, sandbox, read=inputs, write=[str(work)],
                                                         owner=owner))
    protect_harness(env)
    features = work / "run_features.json"
    counts = (settings.warmup_forwards, settings.profiled_forwards)
    plain = driver_command(settings.python, "profile", problem, candidate, *counts, out=features)
    measured = driver_command(settings.python, "ncu", problem, candidate, *counts)
    script = work / DRIVER_NAME
    script.write_text(driver_script([plain, measured], env, ["PYTHONPATH", *(settings.env or {})]))
    script.chmod(0o755)
    try:
        return _steps(run, candidate, settings, work, keep, plain, measured, features, env, sandbox, inputs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _steps(run: ProfileRun, candidate: Path, settings: ProfileSettings, work: Path, keep: bool, plain: list[str],
           measured: list[str], features: Path, env: dict[str, str], sandbox, inputs: list[str]) -> ProfileRun:
    from kernelskill.review.caches import OWNER_VAR
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
    step = run_step(plain, settings.run_timeout_s, work, env)
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
    command = ncu_profile_command(ncu, measured, report, settings.max_kernel_launches)
    ncu_home = str(Path(ncu).resolve().parent)
    ncu_env = {**clean_environment(settings.env, sandbox, mode="ncu-target", read=[*inputs, ncu_home],
                                   write=[str(work)], owner=env.get(OWNER_VAR)),
               **{k: env[k] for k in ("KERNELSKILL_SCRATCH", "HOME", "TMPDIR") if k in env}}
    if sandbox.network or sandbox.filesystem:  # ncu and its program: a network namespace and a /tmp of their own
        command = [sys.executable, "-m", "kernelskill.review.confine_ncu", "--", *command]
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
