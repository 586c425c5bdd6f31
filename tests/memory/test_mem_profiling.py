"""Profiling a candidate (profiling.py, collect.profile_candidate) without a GPU: the driver (profile_driver.py), the ncu
command lines, and every outcome of the ncu run (ok, missing, not permitted, timeout, failure, no kernels) against a
fake ncu and a fake python on PATH - each ends in Evidence that says what happened and in a decision."""

from __future__ import annotations

import inspect
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.errors import KernelSkillError
from kernelskill.memory.policy.collect import profile_candidate
from kernelskill.memory.policy.decide import decide
from kernelskill.profiling import driver as profile_driver
from kernelskill.profiling.run import (
    DRIVER_MODULE, DRIVER_NAME, EXIT_NO_GPU, ProfileSettings, classify_ncu_failure, clean_environment, driver_command,
    ncu_import_command, ncu_profile_command, run_step,
)  # fmt: skip
from memhelpers import NCU_DATA

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.register_buffer("scale", torch.full((n,), 2.0))

    def forward(self, x):
        return torch.relu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
'''

CANDIDATE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.register_buffer("scale", torch.ones(n))  # same name and shape: takes Model's values
        self.extra = nn.Parameter(torch.zeros(3))  # ModelNew's own: kept

    def forward(self, x):
        y = x @ self.linear.weight.t() + self.linear.bias
        return y.clamp_min(0) * self.scale
'''

# The fake ncu logs its arguments and the names of its environment variables, then behaves as
# KERNELSKILL_FAKE_NCU_MODE says (KERNELSKILL_ variables pass the sandbox's allowlist).
FAKE_NCU = f"""#!{sys.executable}
import json, os, sys, time
args = sys.argv[1:]
with open(os.environ["KERNELSKILL_FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"args": args, "env": sorted(os.environ)}}) + "\\n")
mode = os.environ.get("KERNELSKILL_FAKE_NCU_MODE", "ok")
if "--import" in args:
    sys.stdout.write(open(os.environ["KERNELSKILL_FAKE_NCU_CSV"]).read())
    sys.exit(0)
if mode == "hang":
    time.sleep(60)
if mode == "perm":
    print("==PROF== Connected to process 4242")
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
          "on the target device 0.")
    sys.exit(0)
if mode == "fail":
    print("==ERROR== The application returned an error code (1).")
    sys.exit(1)
if mode == "nokernels":
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
export = args[args.index("--export") + 1]
open(export + ".ncu-rep", "w").write("fake report")
print("==PROF== Disconnected from process 4242")
"""

# The fake python stands in for the driver run: "profile" writes run features, "ncu" does nothing.
FAKE_PYTHON = f"""#!{sys.executable}
import importlib.util, json, os, sys
args = sys.argv[1:]
assert args[:2] == ["-m", "kernelskill.profiling.driver"], args
spec = importlib.util.find_spec(args[1])  # found with the environment the driver gets
compile(open(spec.origin).read(), spec.origin, "exec")  # the driver must at least be valid Python
mode = args[2]
with open(os.environ["KERNELSKILL_FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"args": sys.argv[1:], "env": sorted(os.environ)}}) + "\\n")
if os.environ.get("KERNELSKILL_FAKE_PY_MODE") == "crash":
    print("Traceback (most recent call last):\\nRuntimeError: boom in ModelNew.forward", file=sys.stderr)
    sys.exit(2)
if mode == "profile":
    json.dump({{"source": "torch.profiler", "forwards": 10, "forward_time_us": 140.0,
               "kernels": [{{"name": "scale_shift_kernel", "count": 10, "total_time_us": 1310.0}}]}},
              open(args[args.index("--out") + 1], "w"))
"""


def executable(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def files(tmp_path):
    problem, candidate = tmp_path / "problem.py", tmp_path / "candidate.py"
    problem.write_text(PROBLEM)
    candidate.write_text(CANDIDATE)
    return problem, candidate


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "ncu", FAKE_NCU)
    python = executable(bin_dir / "python", FAKE_PYTHON)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("KERNELSKILL_FAKE_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_CSV", str(NCU_DATA / "h200" / "streaming_elementwise.csv"))
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("MY_SERVICE_API_KEY", "do-not-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "do-not-leak")
    monkeypatch.setenv("DB_PASSWORD", "do-not-leak")
    monkeypatch.setenv("KERNELSKILL_HARMLESS", "1")
    return python, tmp_path / "calls.jsonl"


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


# ---- the driver ------------------------------------------------------------------------------------------------------


def test_driver_is_complete(files):
    problem, candidate = files
    command = driver_command("py", "profile", problem, candidate, warmup_forwards=5, profiled_forwards=7,
                             out=Path("o.json"))  # fmt: skip
    assert command[:4] == ["py", "-m", DRIVER_MODULE, "profile"] and DRIVER_MODULE == profile_driver.__name__
    assert str(problem.resolve()) in command and str(candidate.resolve()) in command
    source = inspect.getsource(profile_driver)
    for part in ("--warmup 5", "--forwards 7", "--out o.json"):
        assert part in " ".join(command)
    for part in ("torch.cuda.cudart().cudaProfilerStart()",
                 "torch.cuda.cudart().cudaProfilerStop()", "state_dict()", "tuple(source.shape) == tuple(value.shape)",
                 "ProfilerActivity.CUDA", "torch.no_grad()"):  # fmt: skip
        assert part in source
    # warm-up forwards come before the profiled range, and exactly one forward is inside it
    main = source[source.index("def main"):]
    ncu_part = main[main.index('if mode == "ncu"'):main.index("cudaProfilerStop")]
    assert main.index("range(args.warmup)") < main.index("cudaProfilerStart")
    assert ncu_part.count("model(*inputs)") == 1
    with pytest.raises(ValueError):
        driver_command("py", "ncu", problem, candidate, warmup_forwards=0)


def test_driver_copies_matching_parameters_and_runs_on_cpu(files, tmp_path):
    problem, candidate = files
    out = tmp_path / "check.json"
    done = subprocess.run(driver_command(sys.executable, "check", problem, candidate, out=out), capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, check=False,
                          env=clean_environment(read=[str(problem), str(candidate)], write=[str(tmp_path)]))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert sorted(result["copied"]) == ["linear.bias", "linear.weight", "scale"]
    assert result["kept"] == ["extra"]
    assert result["output"]["shape"] == [4, 8]
    assert result["max_abs_diff"] == pytest.approx(0.0, abs=1e-5)  # same weights, same inputs, same function


def test_ncu_command_lines(tmp_path):
    driver = driver_command("py", "ncu", tmp_path / "p.py", tmp_path / "c.py")
    cmd = ncu_profile_command("ncu", driver, tmp_path / "r", launch_count=64)
    joined = " ".join(cmd)
    for part in ("--set full", "--clock-control none", "--profile-from-start off", "--target-processes all",
                 "--launch-count 64", f"--export {tmp_path / 'r'}", f"py -m {DRIVER_MODULE} ncu {tmp_path / 'p.py'}"):  # fmt: skip
        assert part in joined
    assert cmd[-len(driver):] == driver
    assert ncu_import_command("ncu", Path("r.ncu-rep")) == ["ncu", "--import", "r.ncu-rep", "--csv", "--page", "raw"]


def test_environment_drops_secret_looking_names(monkeypatch):
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "BASIC_AUTH", "GCP_CREDENTIALS"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = clean_environment()
    assert not {"OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "BASIC_AUTH",
                "GCP_CREDENTIALS"} & set(env)  # fmt: skip
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["PYTHONUNBUFFERED"] == "1"


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "status", "words"),
    [
        (0, "==PROF== Disconnected", "", None, None),
        (None, "", "", "timed_out", "did not finish within 9 s"),
        (0, "==ERROR== ERR_NVGPUCTRPERM - no permission", "", "not_permitted", "ERR_NVGPUCTRPERM"),
        (0, "==ERROR== An error was reported by the driver", "", "failed", "An error was reported by the driver"),
        (1, "", "some failure", "failed", "ncu exited with 1"),
        (2, "", "Traceback\nRuntimeError: boom", "failed", "the candidate failed under ncu (exit 2): Traceback"),
        (0, "==WARNING== No kernels were profiled.", "", "failed", "no kernel launch"),
        (127, "", "cannot start 'ncu': [Errno 2]", "missing", "cannot start"),
    ],
)  # fmt: skip
def test_classify_ncu_outcomes(returncode, stdout, stderr, status, words):
    from kernelskill.profiling.run import StepResult

    got = classify_ncu_failure(StepResult(["ncu"], returncode, 1.0, stdout, stderr), timeout=9)
    if status is None:
        assert got is None
    else:
        assert got[0] == status and words in got[1]


def test_run_step_kills_the_process_group_at_the_time_limit(tmp_path):
    # the child starts a grandchild that holds the output pipes; only killing the whole group lets this return
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)")
    step = run_step([sys.executable, "-c", code], timeout=1, cwd=tmp_path, env=clean_environment())
    assert step.returncode is None and step.seconds < 20


# ---- profile_candidate end to end (fake ncu and python) --------------------------------------------------------------


def test_profile_with_ncu_gives_full_evidence_and_a_decision(kb, files, fakes, tmp_path):
    python, log = fakes
    problem, candidate = files
    keep = tmp_path / "kept"
    settings = ProfileSettings(python=python, keep_dir=keep, max_kernel_launches=32)
    ev = profile_candidate(problem, candidate, kb, settings)
    assert ev.ncu_status == "ok" and ev.ncu_note is None
    assert ev.ncu.hottest.name == "scale_shift_kernel" and ev.ncu.hottest.launches == 2
    assert ev.profiler is not None and ev.profiler.forward_time_us == 140.0 and ev.profiler_note is None
    assert ev.code_path == str(candidate) and ev.code_features["backend"].value == "torch"
    assert any(line.startswith("ncu profile: `") and "exit 0" in line for line in ev.collection)
    assert any("ncu profiled 2 kernel launch(es)" in line for line in ev.collection)
    # the kept directory holds what is needed to reproduce the run
    assert {DRIVER_NAME, "run_features.json", "ncu_report.ncu-rep", "ncu_raw.csv", "ncu_profile.log",
            "torch_profiler.log", "ncu_import.log"} <= {p.name for p in keep.iterdir()}  # fmt: skip
    recorded = calls(log)
    plain, ncu_run, export = recorded
    assert plain["args"] == driver_command(python, "profile", problem, candidate, out=keep / "run_features.json")[1:]
    assert ncu_run["args"][:4] == ["--set", "full", "--clock-control", "none"]
    assert "--profile-from-start" in ncu_run["args"]
    measured = driver_command(python, "ncu", problem, candidate)
    assert ncu_run["args"][-len(measured):] == measured
    assert " ".join(measured[3:]) in (keep / DRIVER_NAME).read_text()  # the driver's runs, to repeat by hand
    assert export["args"] == ["--import", str(keep / "ncu_report.ncu-rep"), "--csv", "--page", "raw"]
    for call in recorded:  # no secret-looking variable reaches ncu or the program
        assert not {"MY_SERVICE_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD"} & set(call["env"])
        assert "KERNELSKILL_HARMLESS" in call["env"]
    d = decide(kb, ev)
    assert d.ncu_status == "ok" and d.profiler and d.bottleneck == "memory_bandwidth"
    assert d.collection == ev.collection


def test_profile_without_keep_dir_leaves_nothing_behind(kb, files, fakes):
    python, log = fakes
    ev = profile_candidate(*files, kb, ProfileSettings(python=python))
    assert ev.ncu_status == "ok" and "measured forward" in ev.ncu.source
    args = calls(log)[0]["args"]
    driver_dir = Path(args[args.index("--out") + 1]).parent
    assert not driver_dir.exists()


@pytest.mark.parametrize(
    ("mode", "status", "words"),
    [("perm", "not_permitted", "ERR_NVGPUCTRPERM"), ("fail", "failed", "The application returned an error code"),
     ("nokernels", "failed", "no kernel launch"), ("hang", "timed_out", "did not finish within 1 s")],
)  # fmt: skip
def test_ncu_problems_are_stated_and_the_policy_runs_on_what_remains(kb, files, fakes, monkeypatch, mode, status,
                                                                     words):  # fmt: skip
    python, _ = fakes
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_MODE", mode)
    ev = profile_candidate(*files, kb, ProfileSettings(python=python, ncu_timeout_s=1))
    assert ev.ncu_status == status and words in ev.ncu_note and ev.ncu is None
    assert ev.profiler is not None  # the plain run still counts
    d = decide(kb, ev)
    assert d.ncu_status == status and all(f.status == "missing" for f in d.fields)
    assert any(c.startswith(f"ncu metrics: {status} (") and words in c for c in d.caveats)
    runs = {f.id: f for f in d.run_features}
    assert runs["launches_per_forward"].value == 1 and runs["launches_per_forward"].source == "torch_profiler"
    assert d.bottleneck == "structural_fallback" and d.case == "sf_torch_only"  # from the code features


def test_ncu_missing_is_stated_and_a_decision_still_comes_out(kb, files, fakes):
    python, log = fakes
    ev = profile_candidate(*files, kb, ProfileSettings(python=python, ncu="no-such-ncu"))
    assert ev.ncu_status == "missing" and "'no-such-ncu' is not on PATH" in ev.ncu_note
    assert len(calls(log)) == 1  # only the plain run
    d = decide(kb, ev)
    assert any("ncu metrics: missing" in c for c in d.caveats) and d.case == "sf_torch_only"


def test_a_candidate_that_does_not_run_is_not_given_to_ncu(kb, files, fakes, monkeypatch):
    python, log = fakes
    monkeypatch.setenv("KERNELSKILL_FAKE_PY_MODE", "crash")
    ev = profile_candidate(*files, kb, ProfileSettings(python=python))
    assert ev.profiler is None and "did not run (exit 2)" in ev.profiler_note and "boom" in ev.profiler_note
    assert ev.ncu_status == "failed" and ev.ncu_note.startswith("ncu not run: in the plain run, the candidate")
    assert len(calls(log)) == 1
    d = decide(kb, ev)
    assert any(c.startswith("PyTorch profiler: the candidate did not run") for c in d.caveats)


def test_missing_input_files_are_user_errors(kb, files, tmp_path):
    problem, candidate = files
    with pytest.raises(KernelSkillError, match="no such problem file"):
        profile_candidate(tmp_path / "absent.py", candidate, kb)
    with pytest.raises(KernelSkillError, match="cannot read the candidate source"):
        profile_candidate(problem, tmp_path / "absent.py", kb)


def test_explain_profiles_with_the_real_driver_on_a_machine_without_gpu_or_ncu(files, tmp_path, monkeypatch):
    # No fakes: the real driver runs under this Python (torch, no usable GPU) and there is no ncu.
    from typer.testing import CliRunner

    from kernelskill.memory.tools.cli import memory_app

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    problem, candidate = files
    r = CliRunner().invoke(memory_app, ["explain", "--problem", str(problem), "--candidate", str(candidate),
                                        "--ncu", str(tmp_path / "absent" / "ncu"), "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["ncu_status"] == "missing" and "Nsight Compute not found" in data["ncu_note"]
    assert not data["profiler"] and "no CUDA device" in data["profiler_note"]
    assert any(line.startswith("torch profiler: `") and f"exit {EXIT_NO_GPU}" in line for line in data["collection"])
    assert data["bottleneck"] == "structural_fallback" and data["case"] == "sf_torch_only" and data["allowed_methods"]


@pytest.mark.parametrize("script", ["gpu_profile_check.py"])
def test_gpu_check_script_lists_its_cases(script):
    path = Path(__file__).resolve().parents[2] / "scripts" / script
    done = subprocess.run([sys.executable, str(path), "--list"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert 2 <= len(lines) <= 3
    for line in lines:
        problem, candidate = line.split()[:2]
        assert Path(problem).is_file() and Path(candidate).is_file() and candidate.endswith("triton_ok.py")
