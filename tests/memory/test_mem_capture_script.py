"""scripts/capture_ncu.py without a GPU: arguments, scenario programs, ncu command lines, and the orchestration
(success, ncu failure, timeout, budget) against a fake ncu and a fake python."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from memhelpers import NCU_DATA, load_capture_script

capture = load_capture_script()

FAKE_NCU = f"""#!{sys.executable}
import os, sys, time
args = sys.argv[1:]
mode = os.environ.get("KERNELSKILL_FAKE_NCU_MODE", "ok")
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.0.0 (fake)")
    sys.exit(0)
if "--import" in args:
    report = args[args.index("--import") + 1]
    if not os.path.exists(report):
        print(f"==ERROR== cannot open {{report}}", file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(open(os.environ["KERNELSKILL_FAKE_NCU_CSV"]).read())
    sys.exit(0)
if mode == "hang":
    time.sleep(60)
if mode == "fail":
    print("==PROF== Connected to process 4242")
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
if mode == "error_rc0":
    print("==ERROR== An error was reported by the driver")
    sys.exit(0)
export = args[args.index("--export") + 1]
open(export + ".ncu-rep", "w").write("fake report")
print("==PROF== Disconnected from process 4242")
"""

FAKE_PYTHON = f"""#!{sys.executable}
import json, sys
if sys.argv[1] == "-c":
    print("fake 1.0")
    sys.exit(0)
program, mode = sys.argv[1], sys.argv[2]
compile(open(program).read(), program, "exec")  # the written scenario program must at least be valid Python
if mode == "profile":
    json.dump({{"source": "torch.profiler", "forwards": 10, "forward_time_us": 300.0,
               "kernels": [{{"name": "k", "count": 480, "total_time_us": 960.0}}]}}, open(sys.argv[3], "w"))
"""


def executable(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_CSV", str(NCU_DATA / "synthetic_many_tiny_launches.csv"))
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_MODE", "ok")
    return executable(tmp_path / "ncu", FAKE_NCU), executable(tmp_path / "python", FAKE_PYTHON)


def run_main(tmp_path, fakes, *extra: str) -> int:
    ncu, python = fakes
    return capture.main(["--out", str(tmp_path / "out"), "--ncu", ncu, "--python", python, *extra])


def test_arguments():
    args = capture.parse_args(["--out", "d"])
    assert args.out == Path("d") and args.ncu == "ncu" and args.timeout_s == 120 and args.budget_s == 270
    assert args.python == sys.executable and args.only is None and not args.profile_all
    with pytest.raises(SystemExit):
        capture.parse_args([])  # --out is required
    with pytest.raises(SystemExit):
        capture.parse_args(["--out", "d", "--only", "no_such_scenario"])
    assert capture.parse_args(["--list"]).list


def test_scenarios_cover_the_issue():
    names = {s.name for s in capture.SCENARIOS}
    assert names == {"streaming_elementwise", "strided_transpose", "naive_gemm", "tiled_gemm_fp32", "row_reduction",
                     "many_tiny_launches", "register_heavy"}  # fmt: skip
    for s in capture.SCENARIOS:
        assert s.launch_count <= 48 and s.measured_forwards >= 1
        kernels_per_forward = 48 if s.name == "many_tiny_launches" else 1
        assert s.measured_forwards * kernels_per_forward >= s.launch_skip + s.launch_count, s.name


@pytest.mark.parametrize("scenario", capture.SCENARIOS, ids=lambda s: s.name)
def test_scenario_programs_are_complete(scenario):
    source = capture.scenario_source(scenario)
    compile(source, scenario.name, "exec")
    for part in ("class ModelNew", "def get_inputs", "def get_init_inputs", "torch.cuda.profiler.start()",
                 "torch.cuda.profiler.stop()", 'if __name__ == "__main__"', "export_chrome_trace",
                 f"WARMUP_FORWARDS = {scenario.warmup_forwards}"):  # fmt: skip
        assert part in source
    assert "load_inline" not in source  # no CUDA C++ builds (30 s each)


def test_ncu_command_lines():
    s = next(x for x in capture.SCENARIOS if x.name == "many_tiny_launches")
    cmd = capture.ncu_profile_command("ncu", "py", Path("p.py"), Path("out/reports/x"), s)
    joined = " ".join(cmd)
    for part in ("--set full", "--clock-control none", "--target-processes all", "--profile-from-start off",
                 "--launch-skip 0", "--launch-count 48", "--export out/reports/x", "py p.py ncu"):  # fmt: skip
        assert part in joined
    expected = ["ncu", "--import", "r.ncu-rep", "--csv", "--page", "raw"]
    assert capture.ncu_import_command("ncu", Path("r.ncu-rep")) == expected


def test_summarize_csv():
    summary = capture.summarize_csv((NCU_DATA / "synthetic_many_tiny_launches.csv").read_text())
    assert summary["kernels"] == 4 and summary["launches"] == 48
    assert summary["hot_ms"] == pytest.approx(0.00221)
    with pytest.raises(ValueError):
        capture.summarize_csv("==PROF== nothing\n")


@pytest.mark.parametrize(("name", "hot_ms"), [("streaming_elementwise", 0.130832), ("tiled_gemm_fp32", 3.235808),
                                              ("many_tiny_launches", 0.0028373)])  # fmt: skip
def test_summarize_real_ncu_2025_csv(name, hot_ms):
    # ncu 2025.3 writes "us" / "ms"; the table once knew only "usecond" and fell back to nanoseconds (1000x off)
    summary = capture.summarize_csv((NCU_DATA / "h200" / f"{name}.csv").read_text())
    assert summary["hot_ms"] == pytest.approx(hot_ms, rel=1e-4)


@pytest.mark.parametrize(("unit", "ms"), [("ns", 1e-6), ("nsecond", 1e-6), ("us", 1e-3), ("usecond", 1e-3),
                                          ("ms", 1.0), ("msecond", 1.0), ("s", 1e3), ("second", 1e3)])  # fmt: skip
def test_time_units(unit, ms):
    assert capture.time_unit_ms(unit) == ms


def test_unknown_time_unit_is_an_error():
    text = (NCU_DATA / "h200" / "streaming_elementwise.csv").read_text()
    header, units, rest = text.split("\n", 2)
    cells = units.split('","')
    col = header.split('","').index("gpu__time_duration.sum")
    assert cells[col] == "us"
    cells[col] = "jiffy"
    with pytest.raises(ValueError, match="unit 'jiffy', not a time unit"):
        capture.summarize_csv("\n".join([header, '","'.join(cells), rest]))


def test_summary_agrees_with_the_package_parser():
    from kernelskill.profiling.ncu import load_ncu_csv

    for path in sorted((NCU_DATA / "h200").glob("*.csv")):
        summary, report = capture.summarize_csv(path.read_text()), load_ncu_csv(path)
        hot = report.hottest
        assert summary["hot_kernel"] == hot.name and summary["launches"] == sum(k.launches for k in report.kernels)
        assert summary["hot_ms"] == pytest.approx(hot.time_ns / hot.launches / 1e6, rel=1e-9), path.name


def test_manifest_matches_the_captures_and_the_scenarios():
    manifest = json.loads((NCU_DATA / "h200" / "manifest.json").read_text())
    assert manifest["environment"]["ncu"].startswith("Version 2025.3.1") and "H200" in manifest["environment"]["gpu"]
    scenarios = {s.name: s for s in capture.SCENARIOS}
    assert {m["name"] for m in manifest["scenarios"]} == set(scenarios)
    for m in manifest["scenarios"]:
        s = scenarios[m["name"]]
        assert m["status"] == "ok"
        summary = capture.summarize_csv((NCU_DATA / "h200" / f"{m['name']}.csv").read_text())
        assert m["hot_ms"] == pytest.approx(summary["hot_ms"], rel=1e-9), m["name"]
        assert (m["expected_bottlenecks"], m["must_allow"], m["must_not_allow"]) == (
            list(s.expected_bottlenecks), list(s.must_allow), list(s.must_not_allow)), m["name"]


def test_capture_writes_everything(tmp_path, fakes, capsys):
    rc = run_main(tmp_path, fakes, "--only", "many_tiny_launches", "streaming_elementwise")
    out = tmp_path / "out"
    assert rc == 0
    for name in ("many_tiny_launches", "streaming_elementwise"):
        assert (out / f"{name}.csv").read_text().startswith('"ID"')
        assert "class ModelNew" in (out / f"{name}.py").read_text()
        assert "ncu profile: exit 0" in (out / f"{name}.log").read_text()
        assert (out / "reports" / f"{name}.ncu-rep").exists()
    assert json.loads((out / "many_tiny_launches.run_features.json").read_text())["forwards"] == 10
    assert not (out / "streaming_elementwise.run_features.json").exists()  # only where the scenario asks
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["environment"]["ncu"].endswith("(fake)")
    tiny = next(s for s in manifest["scenarios"] if s["name"] == "many_tiny_launches")
    assert tiny["status"] == "ok" and tiny["kernels"] == 4 and tiny["launches"] == 48
    assert tiny["expected_bottlenecks"] == ["launch_overhead"] and "--set" in tiny["commands"][1]
    table = capsys.readouterr().out
    assert "scenario" in table and "many_tiny_launches" in table and "ok" in table


def test_ncu_failure_prints_its_output_and_the_others_continue(tmp_path, fakes, capsys, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_MODE", "fail")
    rc = run_main(tmp_path, fakes, "--only", "naive_gemm", "row_reduction")
    assert rc == 1
    err = capsys.readouterr().err
    assert err.count("ERR_NVGPUCTRPERM") == 2  # full ncu output, for each scenario
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [s["status"] for s in manifest["scenarios"]] == ["failed (ncu profile)"] * 2


def test_error_with_exit_0_is_a_failure(tmp_path, fakes, capsys, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_MODE", "error_rc0")
    assert run_main(tmp_path, fakes, "--only", "naive_gemm") == 1
    assert "An error was reported by the driver" in capsys.readouterr().err


def test_timeout_kills_the_step(tmp_path, fakes, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_MODE", "hang")
    assert run_main(tmp_path, fakes, "--only", "naive_gemm", "--timeout-s", "1") == 1
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["scenarios"][0]["status"] == "timeout (ncu profile)"
    assert manifest["scenarios"][0]["seconds"] < 30


def test_exhausted_budget_skips_scenarios(tmp_path, fakes):
    assert run_main(tmp_path, fakes, "--budget-s", "0") == 1
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert len(manifest["scenarios"]) == 7 and all(s["status"].startswith("skipped") for s in manifest["scenarios"])


def test_missing_ncu_is_reported(tmp_path, capsys):
    assert capture.main(["--out", str(tmp_path), "--ncu", str(tmp_path / "no-ncu")]) == 2
    assert "ncu not found" in capsys.readouterr().err


def test_list_needs_no_output_directory(capsys):
    assert capture.main(["--list"]) == 0
    assert "register_heavy" in capsys.readouterr().out


def test_run_step_reports_a_missing_executable(tmp_path):
    step = capture.run_step([str(tmp_path / "missing")], timeout=5, cwd=tmp_path)
    assert step.returncode == 127 and "cannot start" in step.stderr
