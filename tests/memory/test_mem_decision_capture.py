"""scripts/capture_decision_bench.py without a GPU: arguments, the case list, the written programs, CUDA kernels
through nvcc, and the whole orchestration against a fake ncu and a fake python (file layout, manifests, budget)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.memory.tools.bench import load_manifest, run_bench
from kernelskill.memory.features.codeview import build_view
from kernelskill.memory.features.extract import extract_features
from kernelskill.problem import read_problem
from kernelskill.review.work import measure_problem_work
from kernelskill.store import RunStore
from memhelpers import NCU_DATA, REPO

sys.path.insert(0, str(REPO / "scripts"))
spec = importlib.util.spec_from_file_location("capture_decision_bench", REPO / "scripts" / "capture_decision_bench.py")
dbench = importlib.util.module_from_spec(spec)
sys.modules["capture_decision_bench"] = dbench  # dataclasses look their module up
spec.loader.exec_module(dbench)
CASES = dbench.CASES


def test_arguments():
    args = dbench.parse_args(["--out", "d"])
    assert args.budget_s == 470 < 480 and args.jobs == 8 and args.ncu == "ncu" and args.from_run == []
    bad_args = ([], ["--out", "d", "--only", "nope"], ["--out", "d", "--jobs", "0"], ["--out", "d", "--budget-s", "-1"])
    for bad in bad_args:
        with pytest.raises(SystemExit):
            dbench.parse_args(bad)
    assert dbench.parse_args(["--list"]).list


def test_the_classic_cases_cover_the_issue(kb):
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)) and all(n.isidentifier() for n in names)
    methods = {m.id for m in kb.methods}
    for c in CASES:
        assert c.expert and set(c.expert) <= methods, c.name
        assert len(c.why) > 20 and 1 <= c.launch_count <= 16  # ~2.5 s of ncu replay per profiled launch
    # the issue's list of classic cases, each with an expert method that answers it
    wanted = {"naive_gemm": "shared_memory_tiling", "strided": "coalesce_memory_access",
              "tiny_launches": "cuda_graphs", "bank_conflicts": "avoid_bank_conflicts",
              "register_spills": "reduce_register_pressure", "serial_softmax": "block_reduction",
              "unfused_elementwise_chain": "kernel_fusion", "few_long_rows": "multi_block_reduction",
              "fp16_gemm_no_tensor_cores": "tensor_cores", "serial_cumsum": "parallel_scan"}  # fmt: skip
    for prefix, method in wanted.items():
        case = next(c for c in CASES if prefix in c.name)
        assert method in case.expert, case.name


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_programs_are_a_problem_and_a_candidate(tmp_path, case):
    problem = tmp_path / "problem.py"
    problem.write_text(case.reference)
    read_problem(problem)  # Model, get_inputs, get_init_inputs - or a ProblemError naming what is missing
    compile(case.candidate, "candidate.py", "exec")
    assert "class ModelNew" in case.candidate
    if case.kernels:
        assert case.kernels.strip() in case.candidate and "load_inline" in case.candidate


@pytest.mark.parametrize("case", [c for c in CASES if c.kernels], ids=lambda c: c.name)
def test_cuda_kernels_compile(tmp_path, case):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    src = tmp_path / "k.cu"
    src.write_text("#include <cmath>\n" + case.kernels)
    done = subprocess.run(["nvcc", "-arch=sm_90", "-c", "-o", str(tmp_path / "k.o"), str(src)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_the_problems_have_known_work_on_the_meta_device(tmp_path):
    from kernelskill.review.work import _measure

    work = {}
    for c in CASES:
        p = tmp_path / f"{c.name}.py"
        p.write_text(c.reference)
        work[c.name] = _measure(p)
        assert work[c.name]["bytes"] > 0, c.name
    assert work["naive_gemm_cuda"]["flops"] == 2 * 512**3 and work["naive_gemm_cuda"]["precision"] == "tf32"
    assert work["fp16_gemm_no_tensor_cores_cuda"]["precision"] == "fp16"
    assert work["serial_softmax_cuda"]["flops"] == 0 and work["serial_softmax_cuda"]["bytes"] == 2 * 4096 * 512 * 4


def test_the_code_features_see_what_each_case_is_about(kb):
    def f(name):
        case = next(c for c in CASES if c.name == name)
        return {k: v.value for k, v in extract_features(kb.code_features, build_view(case.candidate)).items()}

    assert f("naive_gemm_cuda")["naive_gemm"]
    assert f("serial_softmax_cuda")["serial_reduction_loop"]
    assert f("serial_cumsum_cuda")["serial_scan"]
    assert f("thread_per_row_gemv_cuda")["matvec_like"]
    assert f("serial_layernorm_triton")["serial_reduction_loop"]
    assert f("library_gemm_with_epilogue")["calls_vendor_library"]
    assert f("unfused_elementwise_chain_triton")["multiple_kernels_per_forward"]


FAKE_PYTHON = f"""#!{sys.executable}
import json, sys
args = sys.argv[1:]
if args[:2] == ["-m", "kernelskill.review.probe"]:  # the problem probe: its check, then its count
    sys.stdin.read()
    print(json.dumps({{"kind": "checked"}}))
    print(json.dumps({{"kind": "counted", "work": {{"source": "flop_counter", "flops": 0.0, "bytes": 32768.0,
                                                    "precision": "fp32"}}}}))
    sys.exit(0)
if args[0] == "-c":
    print("fake 1.0")  # a build (imports the candidate) or an environment probe
    sys.exit(0)
assert args[:2] == ["-m", "kernelskill.profiling.driver"], args  # the profiling driver
mode = args[2]
if mode == "profile":
    json.dump({{"source": "torch.profiler", "forwards": 10, "forward_time_us": 700.0,
               "kernels": [{{"name": "k", "count": 480, "total_time_us": 960.0}}]}},
              open(args[args.index("--out") + 1], "w"))
"""


def executable(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    from test_mem_capture_script import FAKE_NCU

    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_CSV", str(NCU_DATA / "synthetic_many_tiny_launches.csv"))
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_MODE", "ok")
    return executable(tmp_path / "ncu", FAKE_NCU), executable(tmp_path / "python", FAKE_PYTHON)


def test_capture_writes_the_layout_and_a_manifest_the_bench_reads(tmp_path, fakes, kb, capsys):
    ncu, python = fakes
    out = tmp_path / "out"
    rc = dbench.main(["--out", str(out), "--only", "tiny_launches_torch", "serial_softmax_cuda", "--ncu", ncu,
                      "--python", python, "--jobs", "2"])  # fmt: skip
    assert rc == 0, capsys.readouterr()
    for name in ("tiny_launches_torch", "serial_softmax_cuda"):
        case = out / name
        assert (case / "problem.py").is_file() and (case / "candidate.py").is_file()
        assert (case / "profile" / "ncu_raw.csv").read_text().startswith('"ID"')
        assert json.loads((case / "profile" / "run_features.json").read_text())["forwards"] == 10
        # the problem's work is counted by the problem probe (a confined child of the zygote), not by --python
        assert json.loads((case / "problem_work.json").read_text())["bytes"] == measure_problem_work(
            case / "problem.py").bytes
    status = {o["name"]: o["status"] for o in json.loads((out / "capture.json").read_text())["outcomes"]}
    assert status == {"tiny_launches_torch": "ok", "serial_softmax_cuda": "ok"}
    manifest = load_manifest(out / "decision_bench.yaml", kb)
    assert [k.id for k in manifest.kernels] == ["serial_softmax_cuda", "tiny_launches_torch"] or \
        {k.id for k in manifest.kernels} == {"serial_softmax_cuda", "tiny_launches_torch"}
    assert all(k.metrics and k.run_features and k.problem for k in manifest.kernels)
    report = run_bench(out / "decision_bench.yaml", kb)
    assert len(report.kernels) == 2 and not report.empty


def test_budget_skips_what_does_not_fit(tmp_path, fakes):
    ncu, python = fakes
    out = tmp_path / "out"
    assert dbench.main(["--out", str(out), "--only", "naive_gemm_cuda", "--ncu", ncu, "--python", python,
                        "--budget-s", "10"]) == 1  # fmt: skip
    outcome = json.loads((out / "capture.json").read_text())["outcomes"][0]
    assert outcome["status"].startswith("skipped (budget") and not (out / "naive_gemm_cuda" / "profile").exists()


def test_profiling_stops_after_failures_in_a_row(tmp_path, fakes, monkeypatch, capsys):
    """Three kernels failing one after another is a broken setup (session 4: every CUDA case failed the same way):
    the rest are skipped, saying why, instead of spending the GPU budget on the same failure."""
    ncu, python = fakes
    monkeypatch.setenv("KERNELSKILL_FAKE_NCU_MODE", "fail")
    out = tmp_path / "out"
    names = ["serial_softmax_cuda", "serial_cumsum_cuda", "naive_gemm_cuda", "tiny_launches_torch"]
    assert dbench.main(["--out", str(out), "--only", *names, "--ncu", ncu, "--python", python, "--jobs", "2",
                        "--stop-after-failures", "2"]) == 1  # fmt: skip
    status = [o["status"] for o in json.loads((out / "capture.json").read_text())["outcomes"]]
    assert [s.startswith("ncu ") for s in status] == [True, True, False, False], status
    assert status[2:] == ["skipped (2 failures in a row)"] * 2
    assert "failures in a row" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        dbench.parse_args(["--out", "d", "--stop-after-failures", "-1"])


def test_missing_ncu_is_exit_2(tmp_path, capsys):
    assert dbench.main(["--out", str(tmp_path), "--ncu", str(tmp_path / "no-ncu")]) == 2
    assert "ncu not found" in capsys.readouterr().err


def test_llm_kernels_from_a_folder_and_from_a_run(tmp_path, kb):
    d = tmp_path / "llm" / "softmax_gpt"
    d.mkdir(parents=True)
    case = next(c for c in CASES if c.name == "serial_softmax_cuda")
    (d / "problem.py").write_text(case.reference)
    (d / "candidate.py").write_text(case.candidate)
    (d / "labels.yaml").write_text("expert: [block_reduction]\nwhy: a thread per row walks 2048 columns alone\n")
    (tmp_path / "llm" / "incomplete").mkdir()  # no problem.py: not a kernel
    found = dbench.llm_kernels_from_dir(tmp_path / "llm")
    assert [(k.name, k.kind, k.expert) for k in found] == [("llm_softmax_gpt", "llm", ["block_reduction"])]

    run_dir = tmp_path / "run"
    store = RunStore.create(run_dir)
    run_id = store.add_run("bench", "openai/gpt-x", {})
    task = store.add_task(run_id, "23_Softmax", "p.py", case.reference)
    reviews = (("seed-1", True, 0.004), ("seed-2", True, 1.3), ("seed-3", False, None), ("seed-4", False, 0.1),
               ("round-01", True, 0.2))  # seed-4: a wrong kernel is never picked, however slow
    for label, correct, speedup in reviews:
        c = store.add_candidate(task, None, label, case.candidate, origin="seed")
        store.add_review(c.id, {"correct": correct, "compiled": True, "speedup": speedup})
    store.close()
    picked = dbench.llm_kernels_from_run(run_dir, slow_below=0.5, limit=10)
    assert [k.name for k in picked] == ["run_23_Softmax_seed_1", "run_23_Softmax_round_01"]  # slowest first
    assert picked[0].kind == "llm" and picked[0].expert == [] and "openai/gpt-x" in picked[0].description
    assert len(dbench.llm_kernels_from_run(run_dir, slow_below=0.5, limit=1)) == 1


def test_captures_merge_into_the_seeded_folder_once(tmp_path, fakes, kb):
    ncu, python = fakes
    out, seeded = tmp_path / "out", tmp_path / "data" / "ncu" / "h200"
    shutil.copytree(NCU_DATA / "h200", seeded)
    shutil.copytree(NCU_DATA.parent / "decision", tmp_path / "data" / "decision")  # the fixtures it points into
    text = (seeded / "decision_bench.yaml").read_text()  # every classic case is seeded: take one out
    start = text.index("  - id: serial_softmax_cuda\n")
    end = text.index("  - id: ", start + 1)
    (seeded / "decision_bench.yaml").write_text(text[:start] + text[end:])
    for stale in seeded.glob("serial_softmax_cuda.*"):
        stale.unlink()
    before = len(load_manifest(seeded / "decision_bench.yaml", kb).kernels)
    assert dbench.main(["--out", str(out), "--only", "serial_softmax_cuda", "--ncu", ncu, "--python", python,
                        "--merge-into", str(seeded)]) == 0  # fmt: skip
    manifest = load_manifest(seeded / "decision_bench.yaml", kb)
    assert len(manifest.kernels) == before + 1 and manifest.kernels[-1].id == "serial_softmax_cuda"
    for name in ("serial_softmax_cuda.csv", "serial_softmax_cuda.py", "serial_softmax_cuda.problem.py",
                 "serial_softmax_cuda.run_features.json"):
        assert (seeded / name).is_file(), name
    assert dbench.main(["--out", str(out), "--merge-into", str(seeded), "--merge-only"]) == 0  # again: nothing new
    assert len(load_manifest(seeded / "decision_bench.yaml", kb).kernels) == before + 1


def test_a_captured_llm_fixture_is_referenced_not_copied(tmp_path, fakes, kb):
    """A captured kernel that is one of the repository's LLM fixtures (the same bytes) gets an entry pointing at the
    fixture's candidate.py; no second copy of it or its problem lands in the seeded folder. A kernel that differs
    from its namesake among the fixtures is copied as before."""
    ncu, python = fakes
    llm, fixtures = tmp_path / "llm", tmp_path / "data" / "decision" / "llm"
    seeded, out = tmp_path / "data" / "ncu" / "h200", tmp_path / "out"
    case = next(c for c in CASES if c.name == "serial_softmax_cuda")
    for root in (llm, fixtures):
        for name in ("softmax_gpt", "softmax_other"):
            (root / name).mkdir(parents=True)
            (root / name / "problem.py").write_text(case.reference)
            (root / name / "candidate.py").write_text(case.candidate)
            (root / name / "labels.yaml").write_text("expert: [block_reduction]\nwhy: a thread per row\n")
    (fixtures / "softmax_other" / "candidate.py").write_text(case.candidate + "# another version\n")
    seeded.mkdir(parents=True)
    assert dbench.main(["--out", str(out), "--no-classic", "--llm", str(llm), "--ncu", ncu, "--python", python,
                        "--merge-into", str(seeded), "--fixtures", str(fixtures)]) == 0  # fmt: skip
    entries = {k.id: k for k in load_manifest(seeded / "decision_bench.yaml", kb).kernels}
    assert entries["llm_softmax_gpt"].code == "../../decision/llm/softmax_gpt/candidate.py"
    assert not (seeded / "llm_softmax_gpt.py").exists() and not (seeded / "llm_softmax_gpt.problem.py").exists()
    assert (seeded / "llm_softmax_gpt.csv").is_file()  # the capture itself belongs to the seeded folder
    assert entries["llm_softmax_other"].code == "llm_softmax_other.py" and (seeded / "llm_softmax_other.py").is_file()
    run_bench(seeded / "decision_bench.yaml", kb)  # the manifest loads and decides with the referenced code


def test_every_fixture_set_is_looked_in_by_default():
    sets = dbench.fixture_sets()
    assert REPO / "tests" / "data" / "decision" / "llm" in sets
    assert REPO / "tests" / "data" / "decision" / "llm_heldout" in sets
