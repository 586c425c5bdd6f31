"""The real LLM-written KernelBench kernels of the decision benchmark (tests/data/decision/llm) are complete,
cite their public source, and carry expert labels drawn only from the knowledge base's methods."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from kernelskill.memory import load_knowledge

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


# The held-out sets (tests/data/decision/llm_heldout*): more real LLM kernels on KernelBench problems in no earlier
# set, each labelled from the code and the problem sizes alone before the policy was run on it, so the policy can be
# scored on kernels its rules were not written against (docs/cpu/decision_llm_kernels.md gives each set's score).
# Same format and the same checks as above; from the second set on, at least 4 models and a manifest
# (tests/memory/<set>_bench.yaml) that must agree with the folders' labels.
HERE = Path(__file__).resolve().parent
# (folder, at least this many kernels, at least this many models, its manifest), in the order they were added
HELDOUT_SETS = [
    ("llm_heldout", 12, None, None),
    ("llm_heldout2", 12, 4, HERE / "llm_heldout2_bench.yaml"),
    ("llm_heldout3", 10, 4, HERE / "llm_heldout3_bench.yaml"),
    ("llm_heldout4", 10, 4, HERE / "llm_heldout4_bench.yaml"),
    ("llm_heldout5", 10, 4, HERE / "llm_heldout5_bench.yaml"),
]


def _kernels(name: str) -> list[Path]:
    return sorted(p for p in (LLM_DIR.parent / name).iterdir() if p.is_dir())


HELDOUT = [(name, kernel) for name, *_ in HELDOUT_SETS for kernel in _kernels(name)]


@pytest.mark.parametrize("position", range(len(HELDOUT_SETS)), ids=[s[0] for s in HELDOUT_SETS])
def test_heldout_set_is_large_enough_and_on_problems_in_no_earlier_set(position):
    name, at_least, models_at_least, _ = HELDOUT_SETS[position]
    kernels = _kernels(name)
    earlier_kernels = KERNELS + [k for earlier, *_ in HELDOUT_SETS[:position] for k in _kernels(earlier)]
    assert len(kernels) >= at_least
    earlier = {(d / "problem.py").read_bytes() for d in earlier_kernels}
    for kernel in kernels:
        assert (kernel / "problem.py").read_bytes() not in earlier, kernel.name
    assert not {k.name for k in kernels} & {k.name for k in earlier_kernels}
    if models_at_least is not None:
        models = {yaml.safe_load((d / "labels.yaml").read_text())["model"] for d in kernels}
        assert len(models) >= models_at_least


@pytest.mark.parametrize("kernel", [k for _, k in HELDOUT], ids=[f"{n}/{k.name}" for n, k in HELDOUT])
def test_heldout_kernel_folder_is_complete(kernel):
    test_kernel_folder_is_complete(kernel)


@pytest.mark.parametrize("kernel", [k for _, k in HELDOUT], ids=[f"{n}/{k.name}" for n, k in HELDOUT])
def test_heldout_labels_use_known_methods_and_cite_a_commit(kernel):
    test_labels_use_known_methods_and_cite_a_commit(kernel)


@pytest.mark.parametrize("name", [s[0] for s in HELDOUT_SETS])
def test_heldout_readme_lists_every_kernel(name):
    readme = (LLM_DIR.parent / name / "README.md").read_text(encoding="utf-8")
    for kernel in _kernels(name):
        assert f"`{kernel.name}`" in readme, kernel.name


@pytest.mark.parametrize("name, path", [(s[0], s[3]) for s in HELDOUT_SETS if s[3] is not None],
                         ids=[s[0] for s in HELDOUT_SETS if s[3] is not None])
def test_heldout_manifest_matches_the_labels(name, path):
    kernels = _kernels(name)
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    entries = {e["id"]: e for e in manifest["kernels"]}
    assert len(entries) == len(manifest["kernels"])  # no id twice
    assert set(entries) == {k.name for k in kernels}
    for kernel in kernels:
        entry, labels = entries[kernel.name], yaml.safe_load((kernel / "labels.yaml").read_text(encoding="utf-8"))
        assert entry["kind"] == "llm"
        assert (path.parent / entry["code"]).resolve() == (kernel / "candidate.py").resolve()
        assert entry["expert"] == labels["expert"] and entry["why"] == labels["why"], kernel.name
        assert entry["source"] == labels["source"], kernel.name
        problem = entry["problem"]
        assert {"flops", "bytes", "output_bytes", "precision"} <= set(problem), kernel.name
        assert problem["flops"] >= 0 and problem["bytes"] > 0 and 0 < problem["output_bytes"] <= problem["bytes"]
