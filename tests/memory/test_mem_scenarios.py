"""End to end: ncu raw CSVs of the capture scenarios + the scenario sources -> the decision an expert would make.

synthetic_*.csv imitate H200 captures (tests/data/ncu/make_synthetic.py); real captures written by
scripts/capture_ncu.py into tests/data/ncu/h200/ are held to the same expectations (the capture script's
SCENARIOS), so adding them extends this test without changing it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.memory.collect import collect_evidence
from kernelskill.memory.policy import decide
from memhelpers import NCU_DATA, load_capture_script

CAPTURE = load_capture_script()
SCENARIOS = {s.name: s for s in CAPTURE.SCENARIOS}
CAPTURES = sorted(NCU_DATA.glob("synthetic_*.csv")) + sorted((NCU_DATA / "h200").glob("*.csv"))
SCENARIO_CAPTURES = [p for p in CAPTURES if p.stem.removeprefix("synthetic_") in SCENARIOS]


def test_every_scenario_has_a_capture():
    assert {p.stem.removeprefix("synthetic_") for p in SCENARIO_CAPTURES} == set(SCENARIOS)


@pytest.mark.parametrize("csv_path", SCENARIO_CAPTURES, ids=[f"{p.parent.name}/{p.stem}" for p in SCENARIO_CAPTURES])
def test_capture_leads_to_the_expected_decision(kb, csv_path: Path, tmp_path: Path):
    scenario = SCENARIOS[csv_path.stem.removeprefix("synthetic_")]
    code = csv_path.with_suffix(".py")
    if not code.exists():  # synthetic captures: the program the capture script would have written
        code = tmp_path / f"{scenario.name}.py"
        code.write_text(CAPTURE.scenario_source(scenario))
    run = csv_path.with_name(csv_path.stem + ".run_features.json")
    ev = collect_evidence(kb, metrics=csv_path, code=code, run_features=run if run.exists() else None)
    d = decide(kb, ev)
    assert d.bottleneck in scenario.expected_bottlenecks, (d.bottleneck, d.bottleneck_rule, d.caveats)
    assert d.case_status == "matched" and d.allowed_methods
    assert set(scenario.must_allow) <= set(d.allowed_methods), (d.case, d.allowed_methods, d.vetoed)
    assert not set(scenario.must_not_allow) & set(d.allowed_methods), (d.case, d.allowed_methods)
    # a complete trace: every field, predicate and rule is accounted for
    assert len(d.fields) == len(kb.field_mapping) and len(d.predicates) == len(kb.predicates)
    assert len(d.priority_rules) == len(kb.bottleneck_priority_rules.rules)
    assert d.tier_trace.status in ("assigned", "outside_tiers")


SYNTHETIC_DECISIONS = {
    # scenario: (tier, bottleneck, case, allowed methods)
    "streaming_elementwise": ("L", "memory_bandwidth", "mb_dram_pointwise_near_peak",
                              ["algebraic_simplification", "precompute_at_init"]),
    "strided_transpose": ("L", "uncoalesced_access", "ua_one_sided",
                          ["transpose_via_shared_memory", "coalesce_memory_access", "layout_transformation"]),
    "naive_gemm": ("L", "memory_bandwidth", "mb_cache_gemm_untiled",
                   ["shared_memory_tiling", "register_blocking", "tensor_cores", "use_vendor_library"]),
    "tiled_gemm_fp32": ("L", "tensor_core_underuse", "tc_fp32_gemm",
                        ["tensor_cores", "reduce_precision_within_tolerance", "use_vendor_library"]),
    "row_reduction": ("M", "memory_bandwidth", "mb_dram_reduction_headroom",
                      ["thread_coarsening", "launch_config_tuning"]),
    "many_tiny_launches": ("H", "launch_overhead", "lo_graphable",
                           ["cuda_graphs", "kernel_fusion", "algebraic_simplification"]),
    "register_heavy": ("M", "occupancy_limited", "ol_registers",
                       ["reduce_register_pressure", "launch_config_tuning", "increase_occupancy"]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SYNTHETIC_DECISIONS))
def test_synthetic_capture_decision_in_detail(kb, name, tmp_path):
    code = tmp_path / f"{name}.py"
    code.write_text(CAPTURE.scenario_source(SCENARIOS[name]))
    run = NCU_DATA / f"synthetic_{name}.run_features.json"
    d = decide(kb, collect_evidence(kb, metrics=NCU_DATA / f"synthetic_{name}.csv", code=code,
                                    run_features=run if run.exists() else None))  # fmt: skip
    assert (d.tier, d.bottleneck, d.case, d.allowed_methods) == SYNTHETIC_DECISIONS[name]
    assert d.caveats == []  # every rule and case before the decision could be evaluated


def test_renamed_metric_is_found_under_its_old_name(kb):
    d = decide(kb, collect_evidence(kb, metrics=NCU_DATA / "synthetic_streaming_elementwise.csv"))
    dram = next(f for f in d.fields if f.id == "dram_throughput_pct")
    assert dram.status == "ok" and dram.source == "dram__throughput.avg.pct_of_peak_sustained_elapsed"


def test_tiny_launches_without_profiler_fall_back_to_ncu(kb):
    d = decide(kb, collect_evidence(kb, metrics=NCU_DATA / "synthetic_many_tiny_launches.csv"))
    assert d.predicates["launch_bound_profiler"].state == "unknown"
    assert d.predicates["launch_bound_ncu"].state == "true" and d.bottleneck == "launch_overhead"
    assert d.case == "lo_generic"  # without code the graph-eligibility gates are unknown
    runs = {f.id: f for f in d.run_features}
    assert runs["hot_kernel_is_library"].value is True and runs["distinct_kernels"].value == 4


def test_speed_of_light_only_capture_decides_with_caveats(kb):
    d = decide(kb, collect_evidence(kb, metrics=NCU_DATA / "synthetic_sol_only.csv"))
    assert d.bottleneck == "memory_bandwidth" and d.tier == "L"
    missing = {f.id for f in d.fields if f.status == "missing"}
    assert {"achieved_occupancy_pct", "global_ld_sectors", "tensor_pipe_pct"} <= missing
    assert d.predicates["uncoalesced_loads"].state == "unknown"
    assert d.caveats and "global_ld_sectors" in d.missing
