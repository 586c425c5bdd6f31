"""The real LLM-written KernelBench kernels of the decision benchmark (tests/data/decision/llm) are complete,
cite their public source, and carry expert labels drawn only from the knowledge base's methods."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from kernelskill.memory.knowledge import load_knowledge

LLM_DIR = Path(__file__).resolve().parents[1] / "data" / "decision" / "llm"
KERNELS = sorted(p for p in LLM_DIR.iterdir() if p.is_dir())
SOURCE = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}:\S")


def _defines(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}


def test_enough_kernels_from_several_models():
    assert len(KERNELS) >= 26
    models = {yaml.safe_load((d / "labels.yaml").read_text())["model"] for d in KERNELS}
    assert len(models) >= 5


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda p: p.name)
def test_kernel_folder_is_complete(kernel):
    assert {"problem.py", "candidate.py", "labels.yaml"} <= {p.name for p in kernel.iterdir()}
    assert {"Model", "get_inputs", "get_init_inputs"} <= _defines(kernel / "problem.py")
    assert "ModelNew" in _defines(kernel / "candidate.py")
    source = (kernel / "candidate.py").read_text(encoding="utf-8")
    assert "load_inline" in source or "triton.jit" in source  # it launches kernels of its own


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda p: p.name)
def test_labels_use_known_methods_and_cite_a_commit(kernel):
    known = {m.id for m in load_knowledge().methods}
    labels = yaml.safe_load((kernel / "labels.yaml").read_text(encoding="utf-8"))
    assert 1 <= len(labels["expert"]) <= 3 and set(labels["expert"]) <= known, labels["expert"]
    assert len(set(labels["expert"])) == len(labels["expert"])
    assert labels["why"].strip() and labels["description"].strip()
    assert SOURCE.match(labels["source"]), labels["source"]
    assert SOURCE.match(labels["problem_source"]), labels["problem_source"]


def test_readme_lists_every_kernel():
    readme = (LLM_DIR / "README.md").read_text(encoding="utf-8")
    for kernel in KERNELS:
        assert f"`{kernel.name}`" in readme, kernel.name


# The held-out set (tests/data/decision/llm_heldout): more real LLM kernels on other KernelBench problems,
# labelled before the policy was run on them, so the policy can be scored on kernels its rules were not written
# against. Same format and the same checks as above.
HELDOUT_DIR = LLM_DIR.parent / "llm_heldout"
HELDOUT = sorted(p for p in HELDOUT_DIR.iterdir() if p.is_dir())


def test_heldout_has_twelve_kernels_on_problems_not_in_the_first_set():
    assert len(HELDOUT) >= 12
    first = {(d / "problem.py").read_bytes() for d in KERNELS}
    for kernel in HELDOUT:
        assert (kernel / "problem.py").read_bytes() not in first, kernel.name
    assert not {k.name for k in HELDOUT} & {k.name for k in KERNELS}


@pytest.mark.parametrize("kernel", HELDOUT, ids=lambda p: p.name)
def test_heldout_kernel_folder_is_complete(kernel):
    test_kernel_folder_is_complete(kernel)


@pytest.mark.parametrize("kernel", HELDOUT, ids=lambda p: p.name)
def test_heldout_labels_use_known_methods_and_cite_a_commit(kernel):
    test_labels_use_known_methods_and_cite_a_commit(kernel)


def test_heldout_readme_lists_every_kernel():
    readme = (HELDOUT_DIR / "README.md").read_text(encoding="utf-8")
    for kernel in HELDOUT:
        assert f"`{kernel.name}`" in readme, kernel.name


# The second held-out set (tests/data/decision/llm_heldout2): twelve more real LLM kernels on KernelBench problems
# in neither set above, labelled from the code and the problem sizes alone, without reading or running the policy,
# so the policy can be scored on kernels that nobody changing its rules has seen. Same format and the same checks,
# plus its manifest (tests/memory/llm_heldout2_bench.yaml) must agree with the folders' labels.
HELDOUT2_DIR = LLM_DIR.parent / "llm_heldout2"
HELDOUT2 = sorted(p for p in HELDOUT2_DIR.iterdir() if p.is_dir())
HELDOUT2_MANIFEST = Path(__file__).resolve().parent / "llm_heldout2_bench.yaml"


def test_heldout2_has_twelve_kernels_on_problems_in_neither_earlier_set():
    assert len(HELDOUT2) >= 12
    earlier = {(d / "problem.py").read_bytes() for d in KERNELS + HELDOUT}
    for kernel in HELDOUT2:
        assert (kernel / "problem.py").read_bytes() not in earlier, kernel.name
    assert not {k.name for k in HELDOUT2} & {k.name for k in KERNELS + HELDOUT}
    models = {yaml.safe_load((d / "labels.yaml").read_text())["model"] for d in HELDOUT2}
    assert len(models) >= 4


@pytest.mark.parametrize("kernel", HELDOUT2, ids=lambda p: p.name)
def test_heldout2_kernel_folder_is_complete(kernel):
    test_kernel_folder_is_complete(kernel)


@pytest.mark.parametrize("kernel", HELDOUT2, ids=lambda p: p.name)
def test_heldout2_labels_use_known_methods_and_cite_a_commit(kernel):
    test_labels_use_known_methods_and_cite_a_commit(kernel)


def test_heldout2_readme_lists_every_kernel():
    readme = (HELDOUT2_DIR / "README.md").read_text(encoding="utf-8")
    for kernel in HELDOUT2:
        assert f"`{kernel.name}`" in readme, kernel.name


def test_heldout2_manifest_matches_the_labels():
    manifest = yaml.safe_load(HELDOUT2_MANIFEST.read_text(encoding="utf-8"))
    entries = {e["id"]: e for e in manifest["kernels"]}
    assert len(entries) == len(manifest["kernels"])  # no id twice
    assert set(entries) == {k.name for k in HELDOUT2}
    for kernel in HELDOUT2:
        entry, labels = entries[kernel.name], yaml.safe_load((kernel / "labels.yaml").read_text(encoding="utf-8"))
        assert entry["kind"] == "llm"
        assert (HELDOUT2_MANIFEST.parent / entry["code"]).resolve() == (kernel / "candidate.py").resolve()
        assert entry["expert"] == labels["expert"] and entry["why"] == labels["why"], kernel.name
        assert entry["source"] == labels["source"], kernel.name
        problem = entry["problem"]
        assert {"flops", "bytes", "output_bytes", "precision"} <= set(problem), kernel.name
        assert problem["flops"] >= 0 and problem["bytes"] > 0 and 0 < problem["output_bytes"] <= problem["bytes"]


# The third held-out set (tests/data/decision/llm_heldout3): ten more real LLM kernels on KernelBench problems in
# none of the three sets above, labelled from the code and the problem sizes alone, without reading or running the
# policy, to stay unseen while the second held-out set is used to change the rules. Same format and the same checks
# as the second set, with its own manifest (tests/memory/llm_heldout3_bench.yaml).
HELDOUT3_DIR = LLM_DIR.parent / "llm_heldout3"
HELDOUT3 = sorted(p for p in HELDOUT3_DIR.iterdir() if p.is_dir())
HELDOUT3_MANIFEST = Path(__file__).resolve().parent / "llm_heldout3_bench.yaml"


def test_heldout3_has_ten_kernels_on_problems_in_no_earlier_set():
    assert len(HELDOUT3) >= 10
    earlier = {(d / "problem.py").read_bytes() for d in KERNELS + HELDOUT + HELDOUT2}
    for kernel in HELDOUT3:
        assert (kernel / "problem.py").read_bytes() not in earlier, kernel.name
    assert not {k.name for k in HELDOUT3} & {k.name for k in KERNELS + HELDOUT + HELDOUT2}
    models = {yaml.safe_load((d / "labels.yaml").read_text())["model"] for d in HELDOUT3}
    assert len(models) >= 4


@pytest.mark.parametrize("kernel", HELDOUT3, ids=lambda p: p.name)
def test_heldout3_kernel_folder_is_complete(kernel):
    test_kernel_folder_is_complete(kernel)


@pytest.mark.parametrize("kernel", HELDOUT3, ids=lambda p: p.name)
def test_heldout3_labels_use_known_methods_and_cite_a_commit(kernel):
    test_labels_use_known_methods_and_cite_a_commit(kernel)


def test_heldout3_readme_lists_every_kernel():
    readme = (HELDOUT3_DIR / "README.md").read_text(encoding="utf-8")
    for kernel in HELDOUT3:
        assert f"`{kernel.name}`" in readme, kernel.name


def test_heldout3_manifest_matches_the_labels():
    manifest = yaml.safe_load(HELDOUT3_MANIFEST.read_text(encoding="utf-8"))
    entries = {e["id"]: e for e in manifest["kernels"]}
    assert len(entries) == len(manifest["kernels"])  # no id twice
    assert set(entries) == {k.name for k in HELDOUT3}
    for kernel in HELDOUT3:
        entry, labels = entries[kernel.name], yaml.safe_load((kernel / "labels.yaml").read_text(encoding="utf-8"))
        assert entry["kind"] == "llm"
        assert (HELDOUT3_MANIFEST.parent / entry["code"]).resolve() == (kernel / "candidate.py").resolve()
        assert entry["expert"] == labels["expert"] and entry["why"] == labels["why"], kernel.name
        assert entry["source"] == labels["source"], kernel.name
        problem = entry["problem"]
        assert {"flops", "bytes", "output_bytes", "precision"} <= set(problem), kernel.name
        assert problem["flops"] >= 0 and problem["bytes"] > 0 and 0 < problem["output_bytes"] <= problem["bytes"]


# The fourth held-out set (tests/data/decision/llm_heldout4): ten more real LLM kernels on KernelBench problems in
# none of the four sets above, labelled from the code and the problem sizes alone, without reading or running the
# policy. Same checks as the third set, with its own manifest (tests/memory/llm_heldout4_bench.yaml).
HELDOUT4_DIR = LLM_DIR.parent / "llm_heldout4"
HELDOUT4 = sorted(p for p in HELDOUT4_DIR.iterdir() if p.is_dir())
HELDOUT4_MANIFEST = Path(__file__).resolve().parent / "llm_heldout4_bench.yaml"


def test_heldout4_has_ten_kernels_on_problems_in_no_earlier_set():
    assert len(HELDOUT4) >= 10
    earlier = {(d / "problem.py").read_bytes() for d in KERNELS + HELDOUT + HELDOUT2 + HELDOUT3}
    for kernel in HELDOUT4:
        assert (kernel / "problem.py").read_bytes() not in earlier, kernel.name
    assert not {k.name for k in HELDOUT4} & {k.name for k in KERNELS + HELDOUT + HELDOUT2 + HELDOUT3}
    models = {yaml.safe_load((d / "labels.yaml").read_text())["model"] for d in HELDOUT4}
    assert len(models) >= 4


@pytest.mark.parametrize("kernel", HELDOUT4, ids=lambda p: p.name)
def test_heldout4_kernel_folder_is_complete(kernel):
    test_kernel_folder_is_complete(kernel)


@pytest.mark.parametrize("kernel", HELDOUT4, ids=lambda p: p.name)
def test_heldout4_labels_use_known_methods_and_cite_a_commit(kernel):
    test_labels_use_known_methods_and_cite_a_commit(kernel)


def test_heldout4_readme_lists_every_kernel():
    readme = (HELDOUT4_DIR / "README.md").read_text(encoding="utf-8")
    for kernel in HELDOUT4:
        assert f"`{kernel.name}`" in readme, kernel.name


def test_heldout4_manifest_matches_the_labels():
    manifest = yaml.safe_load(HELDOUT4_MANIFEST.read_text(encoding="utf-8"))
    entries = {e["id"]: e for e in manifest["kernels"]}
    assert len(entries) == len(manifest["kernels"])  # no id twice
    assert set(entries) == {k.name for k in HELDOUT4}
    for kernel in HELDOUT4:
        entry, labels = entries[kernel.name], yaml.safe_load((kernel / "labels.yaml").read_text(encoding="utf-8"))
        assert entry["kind"] == "llm"
        assert (HELDOUT4_MANIFEST.parent / entry["code"]).resolve() == (kernel / "candidate.py").resolve()
        assert entry["expert"] == labels["expert"] and entry["why"] == labels["why"], kernel.name
        assert entry["source"] == labels["source"], kernel.name
        problem = entry["problem"]
        assert {"flops", "bytes", "output_bytes", "precision"} <= set(problem), kernel.name
        assert problem["flops"] >= 0 and problem["bytes"] > 0 and 0 < problem["output_bytes"] <= problem["bytes"]
