"""`kernelskill memory validate | explain | methods` through typer's CliRunner."""

from __future__ import annotations

import json
import shutil

import pytest

from typer.testing import CliRunner

from kernelskill.memory.tools.cli import memory_app
from kernelskill.memory.knowledge import default_knowledge_dir
from memhelpers import NCU_DATA, load_capture_script

runner = CliRunner()


def invoke(*args: str):
    # a fixed page width, whatever the environment (CI, xdist workers) says about the terminal
    return runner.invoke(memory_app, list(args), terminal_width=200, env={"COLUMNS": "200"})


def test_validate_prints_counts_and_exits_0(kb):
    r = invoke("validate")
    assert r.exit_code == 0, r.output
    for label, n in (("code features", len(kb.code_features)), ("bottleneck types", len(kb.bottleneck_types)),
                     ("cases", len(kb.decision_table)), ("methods", len(kb.methods)),
                     ("predicates", len(kb.predicates))):  # fmt: skip
        assert f"{label:<18} {n}" in r.output
    assert "valid" in r.output


def test_validate_json():
    r = invoke("validate", "--json")
    data = json.loads(r.output)
    assert r.exit_code == 0 and data["valid"] and data["problems"] == [] and data["counts"]["methods"] >= 30


def test_validate_broken_knowledge_base_exits_2_with_the_problem(tmp_path):
    kb_dir = tmp_path / "kb"
    shutil.copytree(default_knowledge_dir(), kb_dir)
    path = kb_dir / "policy.yaml"
    path.write_text(path.read_text().replace("when: tensor_pipe_pct < 5", "when: tensor_pipe_pct.real < 5", 1))
    r = invoke("validate", "--knowledge", str(kb_dir))
    assert r.exit_code == 2
    assert "policy.yaml: predicates.tensor_pipe_idle.when: invalid expression" in r.stderr
    assert "attribute access is not allowed" in r.stderr and "Traceback" not in r.output + r.stderr


def test_explain_readable_trace(tmp_path):
    code = tmp_path / "naive_gemm.py"
    capture = load_capture_script()
    code.write_text(capture.scenario_source(next(s for s in capture.SCENARIOS if s.name == "naive_gemm")))
    r = invoke("explain", "--metrics", str(NCU_DATA / "synthetic_naive_gemm.csv"), "--code", str(code))
    assert r.exit_code == 0, r.output
    for part in ("Kernels by time", "matmul_naive_kernel", "Normalized fields", "gpu__time_duration.sum",
                 "Run features", "Code features", "Derived fields", "Tier: L", "Predicates", "cache_bound",
                 "Bottleneck priority rules", "matmul_without_reuse <-", "Bottleneck: untiled_matmul",
                 "um_generic <-", "Global forbidden rules", "Allowed methods", "shared_memory_tiling:",
                 "Missing evidence: floor_fp32_ms, floor_memory_ms, gpu_idle_share, launches_per_forward"):  # fmt: skip
        assert part in r.output, part


def test_explain_json_object():
    r = invoke("explain", "--metrics", str(NCU_DATA / "synthetic_many_tiny_launches.csv"), "--run-features",
               str(NCU_DATA / "synthetic_many_tiny_launches.run_features.json"), "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    for key in ("tier", "bottleneck", "case", "allowed_methods", "vetoed", "missing", "predicates", "features"):
        assert key in data
    assert data["bottleneck"] == "launch_overhead" and data["predicates"]["launch_bound_profiler"]["state"] == "true"
    assert data["features"]["backend"]["status"] == "unknown"  # no --code
    runs = {f["id"]: f for f in data["run_features"]}
    assert runs["launches_per_forward"]["value"] == 48 and runs["launches_per_forward"]["source"] == "torch_profiler"


def test_explain_no_match_is_shown(tmp_path):
    code = tmp_path / "c.py"
    # a histogram: atomics into bins, neither a reduction, a product nor elementwise - no structural case fits
    code.write_text("import triton\nimport triton.language as tl\nimport torch.nn as nn\n\n\n@triton.jit\n"
                    "def k(x_ptr, y_ptr):\n    b = tl.load(x_ptr + tl.arange(0, 16))\n"
                    "    tl.atomic_add(y_ptr + b, 1)\n\n\n"
                    "class ModelNew(nn.Module):\n    def forward(self, x, y):\n        k[(1,)](x, y)\n"
                    "        return y\n")
    r = invoke("explain", "--code", str(code))
    assert r.exit_code == 0, r.output
    assert "No case matched for structural_fallback" in r.output
    # the advice the loop would hand its Planner: every method not forbidden, and the trace says why
    assert "fallback: no decision-table case allowed a method" in r.output and "(none)" not in r.output
    data = json.loads(invoke("explain", "--code", str(code), "--json").stdout)
    assert data["case"] is None and data["fallback"] and data["backend"] == "triton"
    assert len(data["allowed_methods"]) > 5 and not set(data["allowed_methods"]) & set(data["forbidden"])


def test_explain_profile_needs_existing_files(tmp_path):
    candidate = tmp_path / "c.py"
    candidate.write_text("x = 1\n")
    r = invoke("explain", "--problem", str(tmp_path / "p.py"), "--candidate", str(candidate))
    assert r.exit_code == 2 and "p.py: no such problem file" in r.stderr


def test_explain_option_errors(tmp_path):
    # since issue 16 --problem alone (with captured evidence) gives the floor; alone it is still an error
    r = invoke("explain", "--problem", str(tmp_path / "p.py"))
    assert r.exit_code == 2 and "--problem alone gives only the floor" in r.stderr
    r = invoke("explain", "--candidate", str(tmp_path / "c.py"))
    assert r.exit_code == 2 and "--candidate needs --problem" in r.stderr
    r = invoke("explain", "--metrics", str(NCU_DATA / "synthetic_sol_only.csv"), "--gpu", "h200")
    assert r.exit_code == 2 and "needs --problem" in r.stderr
    r = invoke("explain")
    assert r.exit_code == 2 and "no evidence given" in r.stderr
    r = invoke("explain", "--metrics", str(tmp_path / "absent.csv"))
    assert r.exit_code == 2 and "cannot read the ncu CSV" in r.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("not a csv from ncu\n")
    r = invoke("explain", "--metrics", str(bad))
    assert r.exit_code == 2 and 'no header line starting with "ID"' in r.stderr
    r = invoke("explain", "--metrics", str(NCU_DATA / "synthetic_naive_gemm.csv"), "--kernel", "nope")
    assert r.exit_code == 2 and "no kernel in" in r.stderr
    broken = tmp_path / "run.json"
    broken.write_text('{"forwards": 0, "kernels": []}')
    r = invoke("explain", "--run-features", str(broken))
    assert r.exit_code == 2 and "forwards" in r.stderr


def test_methods_list_and_detail(kb):
    r = invoke("methods")
    assert r.exit_code == 0 and f"Methods ({len(kb.methods)})" in r.output and "split_k" in r.output
    r = invoke("methods", "warp_level_reduction")
    assert r.exit_code == 0
    for part in ("Preconditions", "Expected metric change", "Forbidden patterns", "__shfl_down_sync",
                 "not applicable: Triton lowers tl.sum"):  # fmt: skip
        assert part in r.output
    data = json.loads(invoke("methods", "tensor_cores", "--json").output)
    assert data["id"] == "tensor_cores" and data["cues"]["triton"]
    r = invoke("methods", "no_such_method")
    assert r.exit_code == 2 and "no method 'no_such_method'" in r.stderr


def test_help_shows_examples():
    r = invoke("explain", "--help")
    assert r.exit_code == 0 and "kernelskill memory explain --metrics ncu.csv" in r.output


GEMM_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(1024, 1024), torch.randn(1024, 1024)]


def get_init_inputs():
    return []
"""


def test_explain_with_the_problem_reads_the_floor_and_ranks_the_methods(tmp_path):
    problem = tmp_path / "gemm.py"
    problem.write_text(GEMM_PROBLEM)
    h200 = NCU_DATA / "h200"
    r = invoke("explain", "--problem", str(problem), "--metrics", str(h200 / "naive_gemm.csv"), "--code",
               str(h200 / "naive_gemm.py"))  # fmt: skip
    assert r.exit_code == 0, r.output
    # the GPU comes from the ncu report (NVIDIA H200): 2 GFLOP at the TF32 peak is 4.34 us; the kernel takes 395 us
    for part in ("Speed of light: floor 0.004341 ms, forward 0.3946 ms (ncu): 1.1 % of the floor", "Tier: H",
                 "Allowed methods, ranked", "shared_memory_tiling │ 6x", "no estimate"):
        assert part in r.output, part
    data = json.loads(invoke("explain", "--problem", str(problem), "--metrics", str(h200 / "naive_gemm.csv"),
                             "--gpu", "a100_sxm", "--forward-ms", "0.5", "--json").output)  # fmt: skip
    runs = {f["id"]: f for f in data["run_features"]}
    assert runs["forward_ms"]["value"] == 0.5 and runs["sol_ms"]["value"] == pytest.approx(2 * 1024**3 / 156e12 * 1e3)
    assert [x["method"] for x in data["ranking"]] == data["allowed_methods"]
