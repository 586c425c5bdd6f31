"""The decision policy: one table entry per decision case, missing evidence, vetoes, tiers and no-match."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memhelpers import BASE_FIELDS, make_evidence
from kernelskill.errors import KernelSkillError
from kernelskill.memory.policy.decide import decide

TABLE = yaml.safe_load((Path(__file__).parent / "decision_cases.yaml").read_text())


def test_every_decision_case_has_a_table_entry(kb):
    covered = {entry["case"] for entry in TABLE}
    missing = [c.id for c in kb.decision_table if c.id not in covered]
    assert not missing, f"decision cases without a test entry in decision_cases.yaml: {missing}"
    unknown = covered - {c.id for c in kb.decision_table}
    assert not unknown, f"decision_cases.yaml names cases that do not exist: {unknown}"


@pytest.mark.parametrize("entry", TABLE, ids=[e["case"] for e in TABLE])
def test_decision_case(kb, entry):
    ev = make_evidence(kb, fields=entry.get("fields"), code=entry.get("code", {}), profiler=entry.get("profiler"),
                       kernel=entry.get("kernel", "candidate_kernel"), problem=entry.get("problem"))  # fmt: skip
    d = decide(kb, ev)
    expect = entry["expect"]
    assert (d.bottleneck, d.case) == (expect["bottleneck"], entry["case"]), _summary(d)
    assert d.case_status == "matched"
    assert [c.id for c in d.cases if c.selected] == [entry["case"]]
    case = next(c for c in kb.decision_table if c.id == entry["case"])
    assert d.allowed_methods, "a matched case must leave at least one method"
    assert set(d.allowed_methods) <= set(case.allowed)
    # Since the methods are ranked (issue 16), allowed_methods is the ranked order, not the case's: the same set,
    # estimated gains above 1 first (highest first), the rest in the case's order.
    assert sorted(d.allowed_methods) == sorted(m for m in case.allowed if m not in {v.method for v in d.vetoed})
    assert_ranked(d, case)
    assert set(case.forbidden) <= set(d.forbidden)
    if "tier" in expect:
        assert d.tier == expect["tier"]
    if "allowed" in expect:
        assert d.allowed_methods == expect["allowed"]
    for method, rule in expect.get("vetoed", {}).items():
        assert (method, rule) in {(v.method, v.rule) for v in d.vetoed}, _summary(d)


def assert_ranked(d, case) -> None:
    assert [r.method for r in d.ranking] == d.allowed_methods and [r.rank for r in d.ranking] == list(
        range(1, len(d.ranking) + 1))
    ahead = [r for r in d.ranking if r.gain is not None and r.gain > 1]
    assert d.ranking[: len(ahead)] == ahead and [r.gain for r in ahead] == sorted((r.gain for r in ahead), reverse=True)
    rest = [r.method for r in d.ranking[len(ahead):]]
    assert rest == [m for m in case.allowed if m in rest]  # the case's order
    for r in d.ranking:
        assert r.case_rank == case.allowed.index(r.method) + 1 - sum(
            1 for m in case.allowed[: case.allowed.index(r.method)] if m not in d.allowed_methods)
        assert (r.gain is None) == (r.rule is None) and r.why


def _summary(d) -> str:
    rules = {r.id: r.state for r in d.priority_rules}
    cases = {c.id: (c.state, c.gates) for c in d.cases}
    return f"bottleneck={d.bottleneck} case={d.case} tier={d.tier} rules={rules} cases={cases} caveats={d.caveats}"


# ---- missing evidence is unknown, never false ----------------------------------------------------------------------


def test_missing_metric_makes_predicates_unknown_not_false(kb):
    fields = {k: v for k, v in BASE_FIELDS.items() if k != "tensor_pipe_pct"}
    d = decide(kb, make_evidence(kb, fields=fields, base=False, code={}))
    tensor = next(f for f in d.fields if f.id == "tensor_pipe_pct")
    assert tensor.status == "missing" and "sm__pipe_tensor_op_hmma_cycles_active" in tensor.note
    for name in ("tensor_pipe_idle", "tensor_pipe_busy"):
        assert d.predicates[name].state == "unknown"
        assert d.predicates[name].missing == ["tensor_pipe_pct"]
    assert "tensor_pipe_pct" in d.missing


def test_unknown_higher_priority_rule_is_reported_when_a_lower_one_decides(kb):
    # No coalescing evidence at all: the uncoalesced rule cannot be evaluated; memory_saturated decides.
    drop = {"global_ld_sectors", "global_ld_requests", "global_st_sectors", "global_st_requests",
            "global_ld_bytes_requested", "global_st_bytes_requested"}  # fmt: skip
    fields = {k: v for k, v in BASE_FIELDS.items() if k not in drop} | {"memory_throughput_pct": 85,
                                                                          "dram_throughput_pct": 85}  # fmt: skip
    d = decide(kb, make_evidence(kb, fields=fields, base=False, code={}))
    rule = next(r for r in d.priority_rules if r.id == "scattered_accesses")
    assert rule.state == "unknown" and "global_ld_sectors" in rule.missing
    assert d.bottleneck == "memory_bandwidth" and d.bottleneck_rule == "memory_saturated"
    assert any("scattered_accesses" in c and "memory_saturated decided" in c for c in d.caveats)


def test_kleene_logic_lets_a_known_false_decide(kb):
    # Without profiler data launch_bound falls back to ncu's view; no code: structure gates are unknown.
    d = decide(kb, make_evidence(kb, fields={}, code=None))
    assert d.predicates["launch_bound_profiler"].state == "unknown"
    assert d.predicates["launch_bound"].state == "false"  # ncu: one kernel, so not launch-bound
    assert d.predicates["matmul_work"].state == "false"  # kernel name does not look like a GEMM
    assert d.bottleneck == "memory_latency"
    ml = {c.id: c for c in d.cases}
    # (ml_naive_gemm is gone: a naive GEMM is untiled_matmul whatever its metrics - issue 16)
    assert ml["ml_loop_unpipelined"].state == "unknown" and "has_k_loop" in ml["ml_loop_unpipelined"].missing
    assert d.case == "ml_generic"
    skipped = "case(s) ml_loop_unpipelined, ml_atomic_contention could not be evaluated"
    assert any(c.startswith(skipped) for c in d.caveats), d.caveats
    # without code, the structural rules are unknown and said to be, not read as false
    rules = {r.id: r.state for r in d.priority_rules}
    assert rules["matmul_without_reuse"] == rules["serial_reduction"] == "unknown"
    assert any("matmul_without_reuse (missing: naive_gemm)" in c for c in d.caveats), d.caveats


def test_without_any_metrics_the_structural_fallback_decides(kb):
    code = {"gemm_like": True, "shared_memory_tiling": True, "has_k_loop": True}
    d = decide(kb, make_evidence(kb, fields=None, code=code))
    assert d.ncu_status == "not_provided" and d.kernel is None and d.kernels == []
    assert all(f.status == "missing" for f in d.fields)
    # the rules read from code alone are known (false here); every rule that needs metrics is unknown
    # (the 16-bit product rule: this code computes in fp32)
    code_rules = {"work_no_output_needs", "matmul_without_reuse", "serial_reduction", "half_matmul_off_tensor_cores"}
    assert all(r.state == "unknown" for r in d.priority_rules if r.id not in code_rules)
    assert all(r.state == "false" for r in d.priority_rules if r.id in code_rules)
    assert d.bottleneck == "structural_fallback" and d.bottleneck_rule is None
    assert d.tier is None and d.tier_trace.status == "unknown"
    assert d.case == "sf_gemm_without_tensor_cores"
    assert any("ncu metrics: not_provided" in c for c in d.caveats)


def test_without_metrics_a_naive_gemm_is_untiled_from_its_code(kb):
    d = decide(kb, make_evidence(kb, fields=None, code={"gemm_like": True, "naive_gemm": True, "has_k_loop": True}))
    assert d.bottleneck == "untiled_matmul" and d.bottleneck_rule == "matmul_without_reuse"
    assert d.case == "um_generic" and d.allowed_methods[0] == "shared_memory_tiling"


def test_ncu_failure_is_stated_in_the_trace(kb):
    ev = make_evidence(kb, fields=None, code={"pointwise": True})
    ev.ncu_status, ev.ncu_note = "not_permitted", "ERR_NVGPUCTRPERM"
    d = decide(kb, ev)
    assert d.ncu_status == "not_permitted" and d.ncu_note == "ERR_NVGPUCTRPERM"
    assert any("not_permitted (ERR_NVGPUCTRPERM)" in c for c in d.caveats)
    assert d.case == "sf_single_pointwise"


def test_no_case_matching_is_an_explicit_outcome(kb):
    # A Triton scatter-add (a histogram: atomics, no reduction, no product, not elementwise), no metrics: no
    # structural case fits.
    d = decide(kb, make_evidence(kb, fields=None, code={"atomics": True}))
    assert d.bottleneck == "structural_fallback"
    assert d.case is None and d.case_status == "no_match"
    assert d.allowed_methods == [] and d.vetoed == []
    assert all(c.state == "false" for c in d.cases)


# ---- tiers -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("limiter", "tier"), [(0, "H"), (39.9, "H"), (40, "M"), (74.99, "M"), (75, "L"), (100.5, "L")])
def test_tier_boundaries(kb, limiter, tier):
    d = decide(kb, make_evidence(kb, fields={"memory_throughput_pct": limiter, "sm_throughput_pct": 0}, code={}))
    assert d.tier == tier and d.tier_trace.status == "assigned"


def test_limiter_above_every_tier_is_an_explicit_outcome(kb):
    d = decide(kb, make_evidence(kb, fields={"memory_throughput_pct": 104.0, "dram_throughput_pct": 104.0},
                                 code={"pointwise": True}))  # fmt: skip
    assert d.tier is None and d.tier_trace.status == "outside_tiers"
    assert d.tier_trace.limiter_value == pytest.approx(104.0)
    assert "outside every tier" in d.tier_trace.note
    assert d.predicates["near_roofline"].state == "unknown"
    undefined = d.predicates["near_roofline"].undefined
    assert undefined and "outside every tier" in undefined[0]
    # tier-gated cases cannot be evaluated; a tier-free case decides, and the trace says so
    gated = {c.id: c for c in d.cases}
    assert gated["mb_dram_pointwise_near_peak"].state == "unknown"
    assert d.case == "mb_dram_headroom"
    assert any("outside every tier" in c for c in d.caveats)


# ---- vetoes ----------------------------------------------------------------------------------------------------


def test_global_veto_removes_methods_and_names_the_rule(kb):
    d = decide(kb, make_evidence(kb, fields={"memory_throughput_pct": 85, "dram_throughput_pct": 85},
                                 code={"pointwise": True}))  # fmt: skip
    assert d.case == "mb_dram_pointwise_near_peak"
    veto = next(v for v in d.vetoed if v.method == "kernel_fusion")
    assert veto.rule == "nothing_to_fuse" and "one kernel" in veto.why
    assert "kernel_fusion" not in d.allowed_methods and "kernel_fusion" in d.forbidden
    rule = next(g for g in d.forbidden_rules if g.id == "nothing_to_fuse")
    assert rule.state == "true" and rule.applied


def test_veto_rule_with_unknown_condition_is_not_applied_but_reported(kb):
    d = decide(kb, make_evidence(kb, fields=None, code=None))
    rule = next(g for g in d.forbidden_rules if g.id == "graphs_need_a_static_forward")
    assert rule.state == "unknown" and not rule.applied and "not applied" in rule.note


def test_on_unknown_veto_applies_the_rule(kb):
    rule = next(g for g in kb.global_forbidden_rules if g.id == "graphs_need_a_static_forward")
    patched = kb.global_forbidden_rules.copy()
    patched[patched.index(rule)] = rule.model_copy(update={"on_unknown": "veto"})
    kb2 = type(kb)(**{**kb.__dict__, "global_forbidden_rules": patched})
    ev = make_evidence(kb2, fields=None, profiler={"launches": 40, "kernel_us": 2, "forward_us": 300},
                       code={"multiple_kernels_per_forward": True, "launch_sites_per_forward": 40})
    ev.code_features["cuda_graph_eligible"] = ev.code_features["cuda_graph_eligible"].model_copy(
        update={"status": "unknown", "value": None})
    d = decide(kb2, ev)
    assert d.case == "lo_generic"
    trace = next(g for g in d.forbidden_rules if g.id == "graphs_need_a_static_forward")
    assert trace.state == "unknown" and trace.applied and "on_unknown: veto" in trace.note
    assert ("cuda_graphs", "graphs_need_a_static_forward") in {(v.method, v.rule) for v in d.vetoed}


def test_method_not_applicable_to_the_backend_is_vetoed(kb):
    code = {"reduction": True, "shared_memory_tiling": True}
    triton = decide(kb, make_evidence(kb, fields={"active_threads_per_warp": 16}, code={**code, "backend": "triton"}))
    cuda = decide(kb, make_evidence(kb, fields={"active_threads_per_warp": 16}, code={**code, "backend": "cuda"}))
    assert triton.case == cuda.case == "wd_tree_reduction"
    assert "warp_level_reduction" in cuda.allowed_methods
    veto = next(v for v in triton.vetoed if v.method == "warp_level_reduction")
    assert veto.rule == "not_applicable_to_triton" and veto.why.startswith("not applicable")
    assert triton.allowed_methods == ["branch_elimination"]


# ---- kernels, purity, JSON ------------------------------------------------------------------------------------------


def test_hottest_kernel_drives_the_decision_and_all_are_recorded(kb):
    from kernelskill.profiling.ncu import load_ncu_csv

    ev = make_evidence(kb, fields=None, code=None)
    ev.ncu, ev.ncu_status = load_ncu_csv(Path(__file__).parents[1] / "data/ncu/synthetic_many_tiny_launches.csv"), "ok"
    d = decide(kb, ev)
    assert len(d.kernels) == 4 and d.kernel == d.kernels[0].name
    assert d.kernels[0].time_us >= d.kernels[1].time_us
    assert sum(k.share for k in d.kernels) == pytest.approx(1.0)
    picked = decide(kb, ev, kernel="CUDAFunctorOnSelf_add")
    assert "CUDAFunctorOnSelf_add" in picked.kernel and any("--kernel" in c for c in picked.caveats)
    with pytest.raises(KernelSkillError, match="no kernel"):
        decide(kb, ev, kernel="no_such_kernel")


def test_decide_is_pure(kb):
    ev = make_evidence(kb, fields={"memory_throughput_pct": 85, "dram_throughput_pct": 85}, code={"pointwise": True})
    before = ev.model_dump()
    a, b = decide(kb, ev), decide(kb, ev)
    assert a == b and ev.model_dump() == before


def test_decision_json_has_the_documented_keys(kb):
    d = decide(kb, make_evidence(kb, fields={}, code={}))
    data = d.model_dump(mode="json")
    for key in ("tier", "bottleneck", "case", "allowed_methods", "vetoed", "missing", "predicates", "features"):
        assert key in data
    assert data["predicates"]["memory_dominant"]["state"] == "true"
    assert data["features"]["backend"]["value"] == "triton"
    assert data["features"]["uncoalesced_pattern"]["status"] == "unknown"
