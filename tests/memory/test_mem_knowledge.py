"""The shipped knowledge base is valid and covers what the project promises; broken copies are explained."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kernelskill.errors import ExitCode, KnowledgeBaseError
from kernelskill.memory import load_knowledge
from kernelskill.memory.knowledge.loader import (
    MIN_CASES, MIN_CODE_FEATURES, MIN_METHODS, REQUIRED_BOTTLENECKS, REQUIRED_METHODS, check_coverage,
    default_knowledge_dir,
)  # fmt: skip


def test_shipped_knowledge_base_covers_the_issue(kb):
    assert check_coverage(kb) == []
    assert len(kb.code_features) >= MIN_CODE_FEATURES
    assert len(kb.decision_table) >= MIN_CASES and len(kb.methods) >= MIN_METHODS
    assert set(REQUIRED_BOTTLENECKS) <= {b.id for b in kb.bottleneck_types}
    assert set(REQUIRED_METHODS) <= {m.id for m in kb.methods}
    assert "launches_per_forward" in {f.id for f in kb.run_features}
    assert "kernel_time_shares" in {f.id for f in kb.run_features}


def test_every_code_feature_covers_both_backends(kb):
    assert {f.mode for f in kb.code_features} == {"rule", "llm"}
    for f in kb.code_features:
        assert f.definition and f.cuda and f.triton
        assert (f.type == "enum") == bool(f.values) and (f.type == "int") == (f.range is not None)


def test_every_method_is_complete_and_reachable(kb):
    allowed_somewhere = {m for c in kb.decision_table for m in c.allowed}
    for m in kb.methods:
        assert m.intent and m.preconditions and m.expected_metric_change and m.forbidden_patterns
        assert m.cues.cuda and m.cues.triton
        assert m.id in allowed_somewhere, f"{m.id} is allowed by no decision case"


def test_every_bottleneck_has_a_rule_or_is_the_fallback(kb):
    ruled = {r.bottleneck for r in kb.bottleneck_priority_rules.rules} | {kb.bottleneck_priority_rules.fallback}
    assert ruled == {b.id for b in kb.bottleneck_types}


def test_field_alternatives_cover_renamed_metrics(kb):
    dram = next(f for f in kb.field_mapping if f.id == "dram_throughput_pct")
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" in dram.sources
    assert "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed" in dram.sources


# ---- broken copies: each problem names file, key and what is wrong -------------------------------------------------


@pytest.fixture
def kb_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "knowledge"
    shutil.copytree(default_knowledge_dir(), dest)
    return dest


def edit(directory: Path, file: str, old: str, new: str) -> None:
    path = directory / file
    text = path.read_text()
    assert old in text, f"{old!r} not in {file}"
    path.write_text(text.replace(old, new, 1))


def problems(directory: Path) -> str:
    with pytest.raises(KnowledgeBaseError) as info:
        load_knowledge(directory)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    return str(info.value)


def test_yaml_syntax_error_names_file_and_line(kb_copy):
    edit(kb_copy, "methods.yaml", "  - id: tensor_cores\n", "  - id: tensor_cores\n   name: [unclosed\n")
    msg = problems(kb_copy)
    assert "methods.yaml: line" in msg and "YAML syntax error" in msg
    assert "section 'methods' is missing" not in msg  # no follow-on noise


def test_unknown_key_names_the_item(kb_copy):
    edit(kb_copy, "methods.yaml", "    intent: Execute matrix products", "    intnet: Execute matrix products")
    msg = problems(kb_copy)
    assert "methods.yaml: methods[2] (id 'tensor_cores').intnet: unknown key (misspelt?)" in msg
    assert "methods.yaml: methods[2] (id 'tensor_cores').intent: Field required" in msg


def test_wrong_type_names_the_key(kb_copy):
    edit(kb_copy, "policy.yaml", "      min: 40\n", "      min: forty\n")
    assert "policy.yaml: headroom_tiers.tiers[1].min: Input should be a valid number" in problems(kb_copy)


def test_unknown_method_in_a_case(kb_copy):
    edit(kb_copy, "decision_table.yaml", "allowed: [reduce_register_pressure, launch_config_tuning]",
         "allowed: [reduce_register_presure, launch_config_tuning]")  # fmt: skip
    msg = problems(kb_copy)
    assert ("decision_table.yaml: decision_table.mb_register_spills.allowed: unknown method "
            "'reduce_register_presure'") in msg


def test_expression_reading_an_undefined_name(kb_copy):
    edit(kb_copy, "policy.yaml", "when: tensor_pipe_pct < 5", "when: tensor_pipe_percent < 5")
    msg = problems(kb_copy)
    assert "policy.yaml: predicates.tensor_pipe_idle.when: expression 'tensor_pipe_percent < 5' reads " \
           "'tensor_pipe_percent', which is not defined before it" in msg  # fmt: skip


def test_predicate_used_before_it_is_defined(kb_copy):
    edit(kb_copy, "policy.yaml", "when: known(limiter_pct)", "when: known(limiter_pct) and launch_bound")
    assert "predicates.ncu_metrics.when: expression" in problems(kb_copy)


def test_unsafe_expression_in_the_knowledge_base(kb_copy):
    edit(kb_copy, "policy.yaml", "when: tensor_pipe_pct < 5", "when: __import__('os').system('id') == 0")
    msg = problems(kb_copy)
    assert "policy.yaml: predicates.tensor_pipe_idle.when: invalid expression" in msg and "not allowed" in msg


def test_enum_comparison_with_an_impossible_value(kb_copy):
    edit(kb_copy, "decision_table.yaml", 'structure: backend == "triton" and bounds_checks',
         'structure: backend == "Triton" and bounds_checks')  # fmt: skip
    msg = problems(kb_copy)
    assert "decision_table.wd_masked_tail.structure: 'backend' is never 'Triton' (values: cuda, torch, triton)" in msg


def test_tiers_with_a_gap(kb_copy):
    edit(kb_copy, "policy.yaml", "      min: 75\n", "      min: 80\n")
    expected = "policy.yaml: headroom_tiers.tiers: tiers M and L have a gap (M ends at 75.0, L starts at 80.0)"
    assert expected in problems(kb_copy)


def test_duplicate_ids(kb_copy):
    edit(kb_copy, "methods.yaml", "  - id: register_blocking\n", "  - id: shared_memory_tiling\n")
    assert "methods.yaml: methods: id 'shared_memory_tiling' is defined twice" in problems(kb_copy)


def test_missing_section(kb_copy):
    (kb_copy / "methods.yaml").unlink()
    assert "section 'methods' is missing" in problems(kb_copy)


def test_section_defined_twice_and_unknown_section(kb_copy):
    (kb_copy / "extra.yaml").write_text("predicates: []\nrecipes: []\n")
    msg = problems(kb_copy)
    assert "policy.yaml: predicates: section already defined in extra.yaml" in msg  # files are read in name order
    assert "extra.yaml: recipes: unknown section" in msg


def test_rule_feature_without_an_extractor(kb_copy):
    path = kb_copy / "code_features.yaml"
    data = yaml.safe_load(path.read_text())
    data["code_features"].append({"id": "uses_magic", "definition": "d", "type": "bool", "mode": "rule",
                                  "cuda": "magic", "triton": "magic"})  # fmt: skip
    path.write_text(yaml.safe_dump(data))
    expected = "code_features.yaml: code_features.uses_magic: mode is 'rule' but features/rules.py has no extractor"
    assert expected in problems(kb_copy)


def test_case_for_an_unknown_bottleneck_and_tier(kb_copy):
    edit(kb_copy, "decision_table.yaml", "    bottleneck: memory_bandwidth\n    tiers: [L]\n",
         "    bottleneck: memory_bandwith\n    tiers: [XL]\n")  # fmt: skip
    msg = problems(kb_copy)
    assert "decision_table.mb_dram_pointwise_near_peak.bottleneck: unknown bottleneck 'memory_bandwith'" in msg
    assert "decision_table.mb_dram_pointwise_near_peak.tiers: unknown tier 'XL'" in msg


def test_coverage_shortfall_is_reported(kb):
    smaller = type(kb)(**{**kb.__dict__, "methods": kb.methods[:29], "decision_table": kb.decision_table[:29],
                          "code_features": kb.code_features[:17]})  # fmt: skip
    found = check_coverage(smaller)
    assert "methods.yaml: methods: 29 entries, at least 30 are required" in found
    assert "decision_table.yaml: decision_table: 29 entries, at least 30 are required" in found
    assert "code_features.yaml: code_features: 17 entries, at least 18 are required" in found


def test_coverage_requires_the_named_ids(kb):
    smaller = type(kb)(**{**kb.__dict__, "methods": [m for m in kb.methods if m.id != "split_k"],
                          "bottleneck_types": [b for b in kb.bottleneck_types if b.id != "warp_divergence"]})
    found = check_coverage(smaller)
    assert "methods.yaml: methods: required id 'split_k' is missing" in found
    assert "policy.yaml: bottleneck_types: required id 'warp_divergence' is missing" in found
