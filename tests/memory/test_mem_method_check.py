"""scripts/method_check.py without a GPU: the AFTER entries (methods, CUDA kernels through nvcc), the CPU smoke run
(Triton under the interpreter) and the field comparison on recorded H200 metrics."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from memhelpers import NCU_DATA, REPO

sys.path.insert(0, str(REPO / "scripts"))
spec = importlib.util.spec_from_file_location("method_check", REPO / "scripts" / "method_check.py")
mcheck = importlib.util.module_from_spec(spec)
sys.modules["method_check"] = mcheck  # dataclasses look their module up
spec.loader.exec_module(mcheck)
CASES = {c.name: c for c in mcheck.CASES}
AFTER = mcheck.AFTER


def test_every_after_entry_applies_its_case_s_first_expert_method(kb):
    assert len(AFTER) >= 11
    for name, after in AFTER.items():
        assert name in CASES, name
        assert kb.method(after.method) is not None, after.method
        assert after.method == CASES[name].expert[0], name
        assert "class ModelNew" in after.candidate and after.candidate != CASES[name].candidate
        if after.kernels:
            assert after.kernels.strip() in after.candidate and "load_inline" in after.candidate
        assert after.note


def test_after_extension_names_differ_from_the_before_ones():
    import re

    names = [re.search(r'load_inline\(name="(\w+)"', c.candidate).group(1) for c in CASES.values() if c.kernels]
    names += [re.search(r'load_inline\(name="(\w+)"', a.candidate).group(1) for a in AFTER.values() if a.kernels]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", [n for n, a in AFTER.items() if a.kernels])
def test_after_cuda_kernels_compile(tmp_path, name):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    src = tmp_path / "k.cu"
    src.write_text("#include <cmath>\n" + AFTER[name].kernels)
    done = subprocess.run(["nvcc", "-arch=sm_90", "-c", "-o", str(tmp_path / "k.o"), str(src)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_cpu_smoke_run_checks_the_triton_and_pytorch_pairs(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "method_check.py"), "--out", str(tmp_path),
                           "--device", "cpu", "--samples", "3"], capture_output=True, text=True, timeout=120,
                          env=env, cwd=REPO)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((tmp_path / "method_check.json").read_text())
    results = {r["case"]: r for r in data["results"]}
    assert set(results) == set(AFTER)
    row = results["unfused_elementwise_chain_triton"]
    assert row["status"] == "ok" and row["method"] == "kernel_fusion"
    assert row["correct"] == {"before": True, "after": True} and row["max_abs_diff"]["after"] < 1e-2
    assert row["time_us"]["before"] > 0 and row["time_us"]["after"] > 0 and row["speedup"] > 0
    assert row["verdict"].startswith("cpu smoke: before and after correct")
    for name, r in results.items():  # every pair that can run on the CPU is correct there
        if "load_inline" in CASES[name].candidate + AFTER[name].candidate:
            assert r["status"].startswith("skipped: CUDA candidate"), name
        else:
            assert r["correct"] == {"before": True, "after": True}, name
    table = (tmp_path / "method_check.md").read_text()
    assert "| unfused_elementwise_chain_triton | kernel_fusion |" in table
    assert "| naive_gemm_cuda | shared_memory_tiling |" in table and "skipped: CUDA candidate" in table


def test_raw_metrics_follow_the_derived_fields(kb):
    metrics = mcheck.raw_metrics(kb, ["smem_bank_conflict_ratio", "tensor_pipe_pct"])
    assert metrics[0] == "gpu__time_duration.sum"
    assert "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum" in metrics
    assert "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum" in metrics
    assert "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" in metrics
    assert mcheck.raw_metrics(kb, ["launches_per_forward"]) == ["gpu__time_duration.sum"]  # the profiler's


def test_merged_launches_and_the_field_comparison_on_a_recorded_capture(kb):
    from kernelskill.profiling.ncu import parse_ncu_csv

    text = (NCU_DATA / "h200" / "many_tiny_launches.csv").read_text()
    per_kernel = parse_ncu_csv(text)
    merged = parse_ncu_csv(mcheck.merge_launches(text))
    assert len(merged.kernels) == 1 and merged.kernels[0].name == mcheck.MERGED
    assert merged.kernels[0].launches == sum(k.launches for k in per_kernel.kernels) > 1
    assert merged.kernels[0].time_ns == pytest.approx(sum(k.time_ns for k in per_kernel.kernels))
    values = mcheck.field_values(kb, merged, None, None, 10.0, "NVIDIA H200")
    assert values["kernel_time_ns"] == pytest.approx(merged.kernels[0].time_ns)
    halved = {**values, "kernel_time_ns": values["kernel_time_ns"] / 2}
    checks = mcheck.check_fields([("kernel_time_ns", "down"), ("launches_per_forward", "down")],
                                 {"before": values, "after": halved}, "")  # fmt: skip
    assert (checks[0].observed, checks[0].agrees) == ("down", True)
    assert checks[1].agrees is None and checks[1].observed is None  # no profiler evidence: unknown, not a failure


def test_one_report_splits_into_before_and_after_at_the_marker():
    import csv
    import io

    text = (NCU_DATA / "h200" / "many_tiny_launches.csv").read_text()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    col = rows[0].index("Kernel Name")
    launches = [r for r in rows[1:] if r and r[0].strip()]
    assert len(launches) >= 3
    launches[1][col] = "void at::cuda::spin_kernel(long)"  # the marker, after the first launch
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    parts = mcheck.split_variants(buf.getvalue())
    from kernelskill.profiling.ncu import parse_ncu_csv

    before, after = parse_ncu_csv(parts["before"]), parse_ncu_csv(parts["after"])
    assert sum(k.launches for k in before.kernels) == 1
    assert sum(k.launches for k in after.kernels) == len(launches) - 2
    assert mcheck.split_variants(text) is None  # no marker: not split, said so by the caller


def test_directions_and_verdicts():
    assert mcheck.direction("grid_size", 4, 1024) == "up"
    assert mcheck.direction("l2_throughput_pct", 40.0, 40.3) == "same"  # within half a point
    assert mcheck.direction("dram_bytes", 100.0, 97.0) == "same"  # within 5 %
    assert mcheck.direction("barrier_share", 0.0, 0.0) == "same"
    r = mcheck.Result("c", "m", "n", status="ok", correct={"before": True, "after": True}, speedup=3.0,
                      fields=[mcheck.FieldCheck("f", "up", 1, 2, "up", True)])  # fmt: skip
    assert mcheck.verdict(r) == "agrees"
    r.fields.append(mcheck.FieldCheck("g", "down", 1, 2, "up", False))
    assert mcheck.verdict(r) == "disagrees: moved the other way: g"
    r.speedup = 0.9
    assert mcheck.verdict(r).startswith("disagrees: not faster (0.90x)")
    r.correct["after"] = False
    assert mcheck.verdict(r) == "disagrees: after not correct"
