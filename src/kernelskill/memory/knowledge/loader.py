"""Read the long-term memory (the YAML files beside this module) and check it.

Reading checks three things and reports every problem at once, each naming file, key and problem:
1. YAML syntax and the schema of each section (schema.py);
2. cross-references: ids are unique, expressions compile and read only names defined before them, cases and rules
   name existing bottlenecks, tiers and methods, every rule-mode code feature and run feature has an extractor
   (the extractors are code above this package: the caller names them, see `Extractors`);
3. (`check_coverage`, used by `memory validate`) the coverage the project promises: 18+ code features, 30+ cases
   and methods, the required bottleneck and method ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from kernelskill.errors import KnowledgeBaseError
from kernelskill.memory.knowledge.expr import Expr, ExprError, compile_expr
from kernelskill.memory.knowledge.schema import (
    SECTIONS, BottleneckSpec, Case, CodeFeatureSpec, DerivedSpec, FieldSpec, ForbiddenRule, HeadroomTiers,
    MethodRanking, MethodSpec, PredicateSpec, PriorityRules, RunFeatureSpec,
)  # fmt: skip

REQUIRED_BOTTLENECKS = ("memory_bandwidth", "memory_latency", "uncoalesced_access", "compute_throughput",
                        "tensor_core_underuse", "occupancy_limited", "warp_divergence", "launch_overhead",
                        "structural_fallback")  # fmt: skip
REQUIRED_METHODS = ("shared_memory_tiling", "tensor_cores", "vectorize_memory_access", "coalesce_memory_access",
                    "kernel_fusion", "cuda_graphs", "increase_occupancy", "launch_config_tuning", "register_blocking",
                    "split_k", "persistent_kernel", "software_pipelining", "algebraic_simplification",
                    "use_vendor_library", "reduce_precision_within_tolerance", "warp_level_reduction")  # fmt: skip
MIN_CODE_FEATURES, MIN_CASES, MIN_METHODS = 18, 30, 30
KERNEL_NAME_GROUPS = ("library", "gemm")  # used by the run features in evidence.py
TIER_NAME = "tier"  # the assigned headroom tier, readable by predicates, rules and cases
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when libyaml is present: 5x faster


def default_knowledge_dir() -> Path:
    return Path(__file__).resolve().parent


@dataclass(frozen=True)
class Extractors:
    """The names the code can compute: rule-mode code features, and run features with the sources each is read from.
    The knowledge base may only declare what is here, and must declare all of it."""

    code_rules: frozenset[str]
    run_features: dict[str, frozenset[str]]
    code_where: str = "features/rules.py"  # where a curator finds them, for messages
    run_where: str = "policy/evidence.py"


@dataclass
class KnowledgeBase:
    directory: Path
    section_files: dict[str, str]
    field_mapping: list[FieldSpec]
    kernel_name_patterns: dict[str, list[str]]
    run_features: list[RunFeatureSpec]
    code_features: list[CodeFeatureSpec]
    derived_fields: list[DerivedSpec]
    headroom_tiers: HeadroomTiers
    bottleneck_types: list[BottleneckSpec]
    predicates: list[PredicateSpec]
    bottleneck_priority_rules: PriorityRules
    global_forbidden_rules: list[ForbiddenRule]
    decision_table: list[Case]
    methods: list[MethodSpec]
    method_ranking: MethodRanking
    exprs: dict[str, Expr] = field(default_factory=dict)  # "predicates.x.when" -> compiled expression

    def expr(self, key: str) -> Expr:
        return self.exprs[key]

    def method(self, method_id: str) -> MethodSpec | None:
        return next((m for m in self.methods if m.id == method_id), None)

    def code_feature(self, feature_id: str) -> CodeFeatureSpec | None:
        return next((f for f in self.code_features if f.id == feature_id), None)

    def where(self, key: str) -> str:
        """'file.yaml: key' for messages."""
        return f"{self.section_files.get(key.split('.')[0], '?')}: {key}"

    def counts(self) -> dict[str, int]:
        return {
            "code features": len(self.code_features), "run features": len(self.run_features),
            "fields": len(self.field_mapping), "derived fields": len(self.derived_fields),
            "bottleneck types": len(self.bottleneck_types), "priority rules": len(self.bottleneck_priority_rules.rules),
            "predicates": len(self.predicates), "forbidden rules": len(self.global_forbidden_rules),
            "cases": len(self.decision_table), "methods": len(self.methods),
            "tiers": len(self.headroom_tiers.tiers),
        }  # fmt: skip


def read_knowledge(directory: str | Path | None, extractors: Extractors) -> KnowledgeBase:
    """Read and check the knowledge base in `directory` (None: the one shipped in the package) against the code's
    `extractors`. `kernelskill.memory.load_knowledge` passes the package's own."""
    root = Path(directory) if directory is not None else default_knowledge_dir()
    if not root.is_dir():
        raise KnowledgeBaseError(f"{root}: the knowledge-base directory does not exist")
    raw, files, problems = _read_sections(root)
    unreadable = bool(problems)  # a file that failed to parse probably holds the sections that look missing
    sections: dict[str, Any] = {}
    for name, spec_type in SECTIONS.items():
        if name not in raw:
            if not unreadable:
                problems.append(f"{root.name}/: section {name!r} is missing (expected in one of the *.yaml files)")
            continue
        try:
            sections[name] = TypeAdapter(spec_type).validate_python(raw[name])
        except ValidationError as exc:
            problems.extend(_schema_problems(files[name], name, raw[name], exc))
    if problems:
        raise _error(root, problems)
    kb = KnowledgeBase(directory=root, section_files=files, **sections)
    problems = _Checker(kb, extractors).run()
    if problems:
        raise _error(root, problems)
    return kb


def check_coverage(kb: KnowledgeBase) -> list[str]:
    """Coverage problems (empty when the knowledge base covers what the project promises)."""
    problems = []
    counted = (("code_features", kb.code_features, MIN_CODE_FEATURES), ("decision_table", kb.decision_table, MIN_CASES),
               ("methods", kb.methods, MIN_METHODS))  # fmt: skip
    for key, items, minimum in counted:
        if len(items) < minimum:
            problems.append(f"{kb.where(key)}: {len(items)} entries, at least {minimum} are required")
    have_b = {b.id for b in kb.bottleneck_types}
    problems += [f"{kb.where('bottleneck_types')}: required id {b!r} is missing" for b in REQUIRED_BOTTLENECKS
                 if b not in have_b]  # fmt: skip
    have_m = {m.id for m in kb.methods}
    problems += [f"{kb.where('methods')}: required id {m!r} is missing" for m in REQUIRED_METHODS if m not in have_m]
    return problems


def _error(root: Path, problems: list[str]) -> KnowledgeBaseError:
    shown = problems[:25]
    more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
    return KnowledgeBaseError(
        f"the knowledge base in {root} is invalid ({len(problems)} problem(s)):\n  " + "\n  ".join(shown) + more
    )


def _read_sections(root: Path) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    raw: dict[str, Any] = {}
    files: dict[str, str] = {}
    problems: list[str] = []
    paths = sorted(root.glob("*.yaml"))
    if not paths:
        problems.append(f"{root}: no *.yaml files")
    for path in paths:
        try:
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
            problems.append(f"{path.name}: {at}YAML syntax error: {getattr(exc, 'problem', None) or exc}")
            continue
        if data is None:
            continue
        if not isinstance(data, dict):
            problems.append(f"{path.name}: the top level must be a mapping of section names, not {type(data).__name__}")
            continue
        for key, value in data.items():
            if key not in SECTIONS:
                problems.append(f"{path.name}: {key}: unknown section (known: {', '.join(SECTIONS)})")
            elif key in raw:
                problems.append(f"{path.name}: {key}: section already defined in {files[key]}")
            else:
                raw[key], files[key] = value, path.name
    return raw, files, problems


def _schema_problems(file: str, section: str, data: Any, exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors():
        loc = list(err["loc"])
        key = section
        # Name list items by their id, which a curator can search for, as well as by position.
        if loc and isinstance(loc[0], int):
            index = loc.pop(0)
            item = data[index] if isinstance(data, list) and index < len(data) else None
            ident = item.get("id") if isinstance(item, dict) else None
            key += f"[{index}]" + (f" (id {ident!r})" if ident else "")
        for part in loc:
            key += f"[{part}]" if isinstance(part, int) else f".{part}"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (misspelt?)"
        out.append(f"{file}: {key}: {msg}")
    return out


class _Checker:
    """Cross-reference checks over a schema-valid knowledge base; collects problems."""

    def __init__(self, kb: KnowledgeBase, extractors: Extractors) -> None:
        self.kb, self.extractors = kb, extractors
        self.problems: list[str] = []

    def add(self, key: str, problem: str) -> None:
        self.problems.append(f"{self.kb.where(key)}: {problem}")

    def run(self) -> list[str]:
        kb = self.kb
        for section in ("field_mapping", "run_features", "code_features", "derived_fields", "bottleneck_types",
                        "predicates", "global_forbidden_rules", "decision_table", "methods"):  # fmt: skip
            self.unique_ids(section, getattr(kb, section))
        self.unique_ids("bottleneck_priority_rules.rules", kb.bottleneck_priority_rules.rules)
        self.unique_ids("headroom_tiers.tiers", kb.headroom_tiers.tiers)
        self.check_extractors()
        self.check_patterns()
        self.check_code_feature_types()
        enums = {f.id: set(f.values or ()) for f in kb.code_features if f.type == "enum"}
        enums[TIER_NAME] = {t.id for t in kb.headroom_tiers.tiers}
        self.enums = enums
        # Names become readable in this order; an expression may only read names defined before it.
        names: set[str] = set()
        self.declare(names, "field_mapping", [f.id for f in kb.field_mapping])
        self.declare(names, "run_features", [f.id for f in kb.run_features if f.type != "per_kernel"])
        self.declare(names, "code_features", [f.id for f in kb.code_features])
        for d in kb.derived_fields:
            self.compile(f"derived_fields.{d.id}.expr", d.expr, names)
            self.declare(names, "derived_fields", [d.id])
        self.check_tiers(names)
        self.declare(names, "headroom_tiers", [TIER_NAME])
        for p in kb.predicates:
            self.compile(f"predicates.{p.id}.when", p.when, names)
            self.declare(names, "predicates", [p.id])
        self.check_rules_and_cases(names)
        self.check_methods(names)
        return self.problems

    def unique_ids(self, key: str, items: list[Any]) -> None:
        seen: set[str] = set()
        for item in items:
            if item.id in seen:
                self.add(key, f"id {item.id!r} is defined twice")
            seen.add(item.id)

    def declare(self, names: set[str], key: str, ids: list[str]) -> None:
        for ident in ids:
            if ident in names:
                self.add(key, f"name {ident!r} is already used by another field, feature or predicate")
            names.add(ident)

    def compile(self, key: str, source: str, names: set[str]) -> None:
        try:
            expr = compile_expr(source)
        except ExprError as exc:
            self.add(key, f"invalid expression {source!r}: {exc}")
            return
        for name in sorted(expr.names - names):
            self.add(key, f"expression {source!r} reads {name!r}, which is not defined before it")
        for name, literal in expr.string_comparisons:
            if name in self.enums and literal not in self.enums[name]:
                self.add(key, f"{name!r} is never {literal!r} (values: {', '.join(sorted(self.enums[name]))})")
        self.kb.exprs[key] = expr

    def check_extractors(self) -> None:
        ex = self.extractors
        rule_ids = {f.id for f in self.kb.code_features if f.mode == "rule"}
        for fid in sorted(rule_ids - ex.code_rules):
            self.add(f"code_features.{fid}", f"mode is 'rule' but {ex.code_where} has no extractor for it")
        for fid in sorted(ex.code_rules - rule_ids):
            self.add("code_features", f"{ex.code_where} extracts {fid!r}, which is not declared here with mode 'rule'")
        for f in self.kb.run_features:
            for source in f.sources:
                if source not in ex.run_features.get(f.id, frozenset()):
                    self.add(f"run_features.{f.id}.sources", f"{ex.run_where} cannot compute it from {source!r}")
        for fid in sorted(ex.run_features.keys() - {f.id for f in self.kb.run_features}):
            self.add("run_features", f"{ex.run_where} computes {fid!r}, which is not declared here")

    def check_patterns(self) -> None:
        for group in KERNEL_NAME_GROUPS:
            if group not in self.kb.kernel_name_patterns:
                self.add("kernel_name_patterns", f"group {group!r} is missing")
        for group, patterns in self.kb.kernel_name_patterns.items():
            for i, pattern in enumerate(patterns):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    self.add(f"kernel_name_patterns.{group}[{i}]", f"invalid regular expression {pattern!r}: {exc}")

    def check_code_feature_types(self) -> None:
        for f in self.kb.code_features:
            key = f"code_features.{f.id}"
            if f.type == "enum" and not f.values:
                self.add(key, "type 'enum' needs a non-empty 'values' list")
            if f.type != "enum" and f.values is not None:
                self.add(key, "'values' is only for type 'enum'")
            if f.type == "int" and (f.range is None or f.range[0] > f.range[1]):
                self.add(key, "type 'int' needs 'range: [low, high]' with low <= high")
            if f.type != "int" and f.range is not None:
                self.add(key, "'range' is only for type 'int'")

    def check_tiers(self, names: set[str]) -> None:
        ht = self.kb.headroom_tiers
        if ht.limiter not in names:
            self.add("headroom_tiers.limiter", f"{ht.limiter!r} is not a field or derived field")
        tiers = sorted(ht.tiers, key=lambda t: t.min)
        for t in tiers:
            if t.min >= t.max:
                self.add(f"headroom_tiers.tiers.{t.id}", f"min {t.min} must be below max {t.max}")
        for a, b in zip(tiers, tiers[1:], strict=False):
            if a.max != b.min:
                gap = "overlap" if a.max > b.min else "a gap"
                self.add("headroom_tiers.tiers", f"tiers {a.id} and {b.id} have {gap} ({a.id} ends at {a.max}, "
                                                 f"{b.id} starts at {b.min})")  # fmt: skip

    def check_rules_and_cases(self, names: set[str]) -> None:
        kb = self.kb
        bottlenecks = {b.id for b in kb.bottleneck_types}
        methods = {m.id for m in kb.methods}
        tiers = {t.id for t in kb.headroom_tiers.tiers}
        pr = kb.bottleneck_priority_rules
        if pr.fallback not in bottlenecks:
            self.add("bottleneck_priority_rules.fallback", f"unknown bottleneck {pr.fallback!r}")
        for r in pr.rules:
            key = f"bottleneck_priority_rules.{r.id}"
            if r.bottleneck not in bottlenecks:
                self.add(key, f"unknown bottleneck {r.bottleneck!r}")
            self.compile(f"{key}.when", r.when, names)
        for g in kb.global_forbidden_rules:
            key = f"global_forbidden_rules.{g.id}"
            self.compile(f"{key}.when", g.when, names)
            for m in g.forbid:
                if m not in methods:
                    self.add(f"{key}.forbid", f"unknown method {m!r}")
        covered = set()
        for c in kb.decision_table:
            key = f"decision_table.{c.id}"
            covered.add(c.bottleneck)
            if c.bottleneck not in bottlenecks:
                self.add(f"{key}.bottleneck", f"unknown bottleneck {c.bottleneck!r}")
            for t in c.tiers or ():
                if t not in tiers:
                    self.add(f"{key}.tiers", f"unknown tier {t!r} (tiers: {', '.join(sorted(tiers))})")
            for gate in ("signature", "structure", "conditions"):
                if getattr(c, gate) is not None:
                    self.compile(f"{key}.{gate}", getattr(c, gate), names)
            for listed in ("allowed", "forbidden"):
                for m in getattr(c, listed):
                    if m not in methods:
                        self.add(f"{key}.{listed}", f"unknown method {m!r}")
            if both := set(c.allowed) & set(c.forbidden):
                self.add(key, f"methods both allowed and forbidden: {', '.join(sorted(both))}")
        for b in sorted(bottlenecks - covered):
            self.add("decision_table", f"bottleneck {b!r} has no case")

    def check_methods(self, names: set[str]) -> None:
        run_tables = {f.id for f in self.kb.run_features if f.type == "per_kernel"}
        for m in self.kb.methods:
            for i, change in enumerate(m.expected_metric_change):
                if change.field not in names | run_tables:
                    self.add(f"methods.{m.id}.expected_metric_change[{i}]", f"unknown field {change.field!r}")
            for i, rule in enumerate(m.gain):
                self.compile(f"methods.{m.id}.gain[{i}].when", rule.when, names)
                self.compile(f"methods.{m.id}.gain[{i}].estimate", rule.estimate, names)
        cap = self.kb.method_ranking.cap
        if cap not in names:
            self.add("method_ranking.cap", f"{cap!r} is not a field, run feature or derived field")
