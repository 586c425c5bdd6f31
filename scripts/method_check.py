#!/usr/bin/env python
"""Check the knowledge base's advice against measurement: apply each decision-bench case's first expert method and
see whether the kernel gets faster and the metrics named in the method's expected_metric_change move as the card says.

Pairs: the classic cases of scripts/decision_bench_cases.py (the slow candidate, "before") and their AFTER entries
(the same candidate with the case's first expert method applied, "after"). Run on a GPU, from the repository root
with kernelskill importable and Nsight Compute on PATH:

    PYTHONPATH=src python scripts/method_check.py --out /tmp/method_check

Phases (the whole run has a --budget, default 300 s; what would not fit is skipped and said so):
  1. CPU, --jobs in parallel: write OUT/<case>/{problem,before,after}.py, count each problem's work (for the
     speed-of-light floor behind pct_of_floor) and build every CUDA extension into one TORCH_EXTENSIONS_DIR;
  2. GPU, in this process: build the three models (the reference's parameters copied by name), check before and
     after against the reference (allclose, atol = rtol = 1e-2), time them side by side (CUDA events, interleaved
     samples, L2 flushed before each, median of --samples) and record a few forwards with the PyTorch profiler
     (launches per forward, GPU busy time);
  3. GPU, one ncu run per case: `ncu --metrics <only the raw metrics the expected fields need> --clock-control none
     --profile-from-start off` around one warm forward of each variant (this script's `_ncu_target` mode; a
     torch.cuda._sleep marker kernel between the two splits the report), exported as the raw CSV. All launches of a
     variant's forward are merged into one record - counters summed, the rest time-weighted, as
     kernelskill.profiling.ncu combines the launches of one kernel - and the fields are derived by the decision
     policy's own code (kernelskill.memory.policy.decide over that evidence).

A field agrees when its observed direction (up, down, or "same" within 5 % relative, 0.5 points for percentages)
is the expected one. A case agrees when the after-kernel is correct, at least 5 % faster and every measured field
agrees; anything else is reported as "disagrees" with the reason, never dropped. Written to OUT: method_check.json
(everything) and method_check.md (the table).

--device cpu is a smoke run without a GPU: Triton candidates run under TRITON_INTERPRET=1 on the AFTER entry's
small cpu_inputs, PyTorch ones on the CPU, CUDA ones are skipped with the reason; no ncu, no fields.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decision_bench_cases import AFTER, CASES, After, Case  # noqa: E402

SEED = 0
TOLERANCE = 1e-2  # atol = rtol
SAME_REL = 0.05  # |after - before| within 5 % of the larger: "same"
SAME_ABS_PCT = 0.5  # ... or within half a percentage point for percent fields
FASTER = 1.05  # a speedup counts from here
DEFAULT_BUDGET_S = 300.0
NCU_CASE_S = 15.0  # a case's ncu run (both variants) needs about this much budget
VARIANTS = ("before", "after")
REPO = Path(__file__).resolve().parent.parent
MERGED = "forward (all launches)"
MARKER = "spin_kernel"  # torch.cuda._sleep's kernel: separates the two variants' launches in one ncu report


@dataclass
class FieldCheck:
    field: str
    expected: str
    before: float | None = None
    after: float | None = None
    observed: str | None = None  # up | down | same; None: not measured
    agrees: bool | None = None
    note: str = ""


@dataclass
class Result:
    case: str
    method: str
    after_note: str
    status: str = "pending"  # ok | skipped: ... | error: ...
    correct: dict[str, bool | None] = field(default_factory=dict)
    max_abs_diff: dict[str, float | None] = field(default_factory=dict)
    time_us: dict[str, float | None] = field(default_factory=dict)
    samples: int = 0
    speedup: float | None = None
    fields: list[FieldCheck] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)  # raw ncu metrics requested
    ncu: dict[str, object] = field(default_factory=dict)  # status, seconds, each variant's kernels
    profiler: dict[str, dict] = field(default_factory=dict)  # variant -> ProfilerSummary as a dict
    verdict: str = ""
    notes: list[str] = field(default_factory=list)


# ---- fields and the raw metrics behind them ------------------------------------------------------------------------


def expected_changes(kb, method: str) -> list[tuple[str, str]]:
    spec = kb.method(method)
    if spec is None:
        raise SystemExit(f"error: method {method!r} is not in the knowledge base")
    return [(c.field, c.direction) for c in spec.expected_metric_change]


def raw_metrics(kb, field_ids: list[str]) -> list[str]:
    """The ncu metrics the fields need (field_mapping sources, through derived fields' expressions); always the time."""
    from kernelskill.profiling.ncu import TIME_METRIC

    mapping = {f.id: f for f in kb.field_mapping}
    derived = {d.id for d in kb.derived_fields}
    found: list[str] = [TIME_METRIC]
    seen: set[str] = set()

    def visit(fid: str) -> None:
        if fid in seen:
            return
        seen.add(fid)
        if fid in mapping:
            found.extend(s for s in mapping[fid].sources if s not in found)
        elif fid in derived:
            for name in sorted(kb.expr(f"derived_fields.{fid}.expr").names):
                visit(name)

    for fid in field_ids:
        visit(fid)
    return found


def recorded_metric_names() -> set[str]:
    """Metric names in the project's real H200 captures (ncu 2025.3.1, --set full): asking ncu only for these keeps
    an alternative name of an older release (unknown to this one) from failing the whole run."""
    names: set[str] = set()
    for path in sorted((REPO / "tests" / "data" / "ncu" / "h200").glob("*.csv")):
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith('"ID"') or line.startswith("ID,"):
                    names.update(next(csv.reader([line])))
                    break
    return names


def available(metrics: list[str], known: set[str]) -> list[str]:
    """The metrics ncu is known to have (all of them when no capture is at hand); the time metric always."""
    from kernelskill.profiling.ncu import TIME_METRIC

    return [m for m in metrics if m == TIME_METRIC or m in known] if known else list(metrics)


def merge_launches(csv_text: str) -> str:
    """The raw CSV with every launch renamed to one kernel, so ncu.py combines them all into one record."""
    lines = csv_text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') or line.startswith("ID,")), None)
    if start is None:
        return csv_text  # parse_ncu_csv reports what is wrong
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    col = next((header.index(c) for c in ("Kernel Name", "Function Name") if c in header), None)
    if col is None:
        return csv_text
    for row in rows[1:]:
        if row and row[0].strip() and len(row) == len(header):  # launches (the units line has no ID)
            row[col] = MERGED
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def field_values(kb, report, profiler, work, forward_us: float | None, gpu: str | None) -> dict[str, object]:
    """Every field, run feature and derived field the policy computes from this evidence (None when unknown)."""
    from kernelskill.memory.policy.evidence import Evidence
    from kernelskill.memory.policy.decide import decide

    problem = None
    if work is not None:
        problem = work.model_copy(update={"forward_ms": forward_us / 1e3 if forward_us else None,
                                          "gpu": work.gpu or gpu})  # fmt: skip
    ev = Evidence(ncu=report, ncu_status="ok" if report is not None else "not_provided", profiler=profiler,
                  problem=problem)  # fmt: skip
    d = decide(kb, ev)
    values: dict[str, object] = {}
    for t in [*d.fields, *d.run_features]:
        values[t.id] = t.value if t.status == "ok" else None
    for t in d.derived:
        values[t.id] = t.value if t.state == "value" else None
    return values


def direction(fid: str, before: float, after: float) -> str:
    band = SAME_REL * max(abs(before), abs(after))
    if fid.endswith("_pct"):
        band = max(band, SAME_ABS_PCT)
    if abs(after - before) <= band:
        return "same"
    return "up" if after > before else "down"


def check_fields(changes: list[tuple[str, str]], values: dict[str, dict[str, object]], why: str) -> list[FieldCheck]:
    checks = []
    for fid, expected in changes:
        b, a = values["before"].get(fid), values["after"].get(fid)
        c = FieldCheck(fid, expected)
        if isinstance(b, bool) or isinstance(a, bool) or not isinstance(b, (int, float)) or \
                not isinstance(a, (int, float)):  # fmt: skip
            c.note = why or "not measured (unknown in the before or after evidence)"
        else:
            c.before, c.after = float(b), float(a)
            c.observed = direction(fid, c.before, c.after)
            c.agrees = c.observed == expected
        checks.append(c)
    return checks


def verdict(r: Result, cpu: bool = False) -> str:
    if not r.status.startswith("ok"):
        return r.status
    if not all(r.correct.get(v) for v in VARIANTS):
        wrong = ", ".join(v for v in VARIANTS if not r.correct.get(v))
        return f"disagrees: {wrong} not correct"
    if cpu:
        return "cpu smoke: before and after correct (times not meaningful)"
    reasons = []
    if r.speedup is None:
        reasons.append("not timed")
    elif r.speedup < FASTER:
        reasons.append(f"not faster ({r.speedup:.2f}x)")
    wrong = [c.field for c in r.fields if c.agrees is False]
    if wrong:
        reasons.append("moved the other way: " + ", ".join(wrong))
    unknown = [c.field for c in r.fields if c.agrees is None]
    if reasons:
        return "disagrees: " + "; ".join(reasons)
    return "agrees" + (f" (not measured: {', '.join(unknown)})" if unknown else "")


# ---- loading and running the models --------------------------------------------------------------------------------


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton's jit and dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def build_models(case_dir: Path, variants: tuple[str, ...], device: str, cpu_inputs: str = ""):
    """The reference and the variants' ModelNew (the reference's parameters copied where name and shape match)."""
    import torch

    ref_mod = load_module(case_dir / "problem.py", f"mcheck_{case_dir.name}_problem")
    init = ref_mod.get_init_inputs()
    torch.manual_seed(SEED)
    reference = ref_mod.Model(*init)
    state = reference.state_dict()
    models = {}
    for v in variants:
        mod = load_module(case_dir / f"{v}.py", f"mcheck_{case_dir.name}_{v}")
        torch.manual_seed(SEED)
        m = mod.ModelNew(*init)
        with torch.no_grad():
            for name, value in m.state_dict().items():
                if name in state and tuple(state[name].shape) == tuple(value.shape):
                    value.copy_(state[name])
        models[v] = m.to(device).eval()
    torch.manual_seed(SEED)
    inputs = eval(cpu_inputs, {"torch": torch}) if cpu_inputs else ref_mod.get_inputs()  # noqa: S307 - our own text
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    return reference.to(device).eval(), models, inputs


def compare(out, expected) -> tuple[bool, float | None]:
    import torch

    if not isinstance(out, torch.Tensor) or not isinstance(expected, torch.Tensor) or out.shape != expected.shape:
        return False, None
    diff = float((out.double() - expected.double()).abs().max()) if out.numel() else 0.0
    return bool(torch.allclose(out.float(), expected.float(), atol=TOLERANCE, rtol=TOLERANCE)), diff


def time_side_by_side(fns: dict[str, object], inputs, device: str, samples: int, warmup: int = 5) -> dict[str, float]:
    """Median microseconds per forward, the variants interleaved (their order alternating), L2 flushed before each."""
    import torch

    for fn in fns.values():
        for _ in range(warmup):
            fn(*inputs)
    times: dict[str, list[float]] = {v: [] for v in fns}
    cuda = device == "cuda"
    flush = torch.empty(64 << 20, dtype=torch.int32, device=device) if cuda else None  # 256 MB > the 50 MB L2
    order = list(fns)
    for s in range(samples):
        for v in order if s % 2 == 0 else order[::-1]:
            if cuda:
                flush.zero_()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fns[v](*inputs)
                end.record()
                end.synchronize()
                times[v].append(start.elapsed_time(end) * 1e3)
            else:
                t0 = time.perf_counter()
                fns[v](*inputs)
                times[v].append((time.perf_counter() - t0) * 1e6)
    return {v: statistics.median(t) for v, t in times.items()}


def profiler_summary(fn, inputs, forward_us: float, forwards: int = 5):
    """Kernels of a few forwards under the PyTorch profiler, as the profiling driver records them."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kernelskill.profiling.summary import ProfilerSummary
    from kernelskill.profiling.driver import _kernels

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(forwards):
            fn(*inputs)
        torch.cuda.synchronize()
    return ProfilerSummary(forwards=forwards, forward_time_us=forward_us, kernels=_kernels(prof))


def ncu_target(case_dir: Path) -> int:
    """Run under ncu: warm forwards outside the profiled range, then one forward of each variant inside it, with a
    marker kernel (torch.cuda._sleep's spin_kernel) between them, so the report splits into before and after."""
    import torch

    _, models, inputs = build_models(case_dir, VARIANTS, "cuda")
    with torch.no_grad():
        for v in VARIANTS:
            for _ in range(3):
                models[v](*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for i, v in enumerate(VARIANTS):
            if i:
                torch.cuda._sleep(1000)
                torch.cuda.synchronize()
            models[v](*inputs)
            torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


def split_variants(csv_text: str) -> dict[str, str] | None:
    """The raw CSV of both forwards -> one CSV per variant (launches in ID order, split at the marker kernel)."""
    lines = csv_text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') or line.startswith("ID,")), None)
    if start is None:
        return None
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    col = next((header.index(c) for c in ("Kernel Name", "Function Name") if c in header), None)
    if col is None:
        return None
    head = [header] + [r for r in rows[1:2] if r and not r[0].strip()]  # the units line
    launches = [r for r in rows[1:] if r and r[0].strip() and len(r) == len(header)]
    launches.sort(key=lambda r: int(r[0]) if r[0].strip().isdigit() else 0)
    marks = [i for i, r in enumerate(launches) if MARKER in r[col]]
    if len(marks) != 1:
        return None
    parts = {"before": launches[:marks[0]], "after": launches[marks[0] + 1:]}
    out = {}
    for v, part in parts.items():
        if not part:
            return None
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(head + part)
        out[v] = buf.getvalue()
    return out


# ---- phase 1 -------------------------------------------------------------------------------------------------------


def write_case(case: Case, after: After, out: Path) -> Path:
    d = out / case.name
    d.mkdir(parents=True, exist_ok=True)
    (d / "problem.py").write_text(case.reference)
    (d / "before.py").write_text(case.candidate)
    (d / "after.py").write_text(after.candidate)
    return d


def prepare(case_dir: Path, python: str, ext_dir: Path, timeout: float) -> list[str]:
    """Count the problem's work and build the CUDA extensions of both variants; returns notes (problems found)."""
    from capture_decision_bench import build_extensions

    from kernelskill.review.work import measure_problem_work

    notes = []
    work = measure_problem_work(case_dir / "problem.py", timeout_s=timeout, python=python)
    (case_dir / "problem_work.json").write_text(work.model_dump_json(indent=2))
    if work.flops is None:
        notes.append(f"problem work unknown: {work.note}")
    for v in VARIANTS:
        path = case_dir / f"{v}.py"
        if "load_inline" not in path.read_text():
            continue
        problem = build_extensions(python, path, _env(ext_dir), timeout)
        if problem:
            notes.append(f"{v}: {problem}")
    return notes


def _env(ext_dir: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if ext_dir is not None:
        env["TORCH_EXTENSIONS_DIR"] = str(ext_dir)
    src = str(Path(__file__).resolve().parent.parent / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


# ---- phase 2 and 3 -------------------------------------------------------------------------------------------------


def measure(r: Result, case_dir: Path, device: str, samples: int, cpu_inputs: str) -> dict:
    """Correctness, side-by-side timing and the profiler's view; returns the variants' ProfilerSummary objects."""
    import torch

    reference, models, inputs = build_models(case_dir, VARIANTS, device, cpu_inputs if device == "cpu" else "")
    with torch.no_grad():
        expected = reference(*inputs)
        for v in VARIANTS:
            r.correct[v], r.max_abs_diff[v] = compare(models[v](*inputs), expected)
        del reference, expected

        def forward(m):
            return lambda *xs: m(*xs)

        fns = {v: forward(models[v]) for v in VARIANTS}
        medians = time_side_by_side(fns, inputs, device, samples)
        r.samples = samples
        r.time_us = {v: round(medians[v], 3) for v in VARIANTS}
        r.speedup = round(medians["before"] / medians["after"], 3) if medians["after"] > 0 else None
        profs = {}
        if device == "cuda":
            for v in VARIANTS:
                profs[v] = profiler_summary(fns[v], inputs, medians[v])
                r.profiler[v] = profs[v].model_dump()
    del models, inputs
    if device == "cuda":
        torch.cuda.empty_cache()
    return profs


def run_ncu(ncu: str, case_dir: Path, metrics: list[str], python: str, ext_dir: Path,
            timeout: float) -> tuple[str, str | None]:
    """One ncu run over both variants' forwards: (status, raw CSV text or None); status "ok" or what went wrong."""
    report = case_dir / "ncu"
    target = [python, str(Path(__file__).resolve()), "_ncu_target", str(case_dir)]
    command = [ncu, "--metrics", ",".join(metrics), "--clock-control", "none", "--profile-from-start", "off",
               "--target-processes", "all", "--force-overwrite", "--export", str(report), *target]  # fmt: skip
    deadline = time.monotonic() + timeout
    for attempt in range(2):
        try:
            left = max(5.0, deadline - time.monotonic())
            done = subprocess.run(command, capture_output=True, text=True, timeout=left, env=_env(ext_dir))
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout:.0f} s", None
        output = done.stdout + done.stderr
        (case_dir / "ncu.log").write_text(f"$ {' '.join(command)}\n{output}")
        errors = [line.strip() for line in output.splitlines() if "==ERROR==" in line]
        unknown = [m for m in metrics if any(m in e for e in errors)] if attempt == 0 else []
        if not unknown or len(unknown) == len(metrics):
            break
        metrics[:] = [m for m in metrics if m not in unknown]  # ncu named them in its errors: ask again without
        command[2] = ",".join(metrics)
    if done.returncode != 0 or errors:
        tail = "; ".join(errors) or " | ".join(output.strip().splitlines()[-4:])
        return f"ncu failed (exit {done.returncode}): {tail[:400]}", None
    rep = report.with_suffix(".ncu-rep")
    if not rep.exists():
        return "ncu wrote no report (no kernel in the profiled range?)", None
    try:
        exported = subprocess.run([ncu, "--import", str(rep), "--csv", "--page", "raw"], capture_output=True,
                                  text=True, timeout=max(5.0, deadline - time.monotonic()))  # fmt: skip
    except subprocess.TimeoutExpired:
        return "the ncu export timed out", None
    if exported.returncode != 0:
        return f"the ncu export failed: {exported.stderr.strip()[-300:]}", None
    (case_dir / "ncu.csv").write_text(exported.stdout)
    return "ok", exported.stdout


def profile_fields(r: Result, kb, case_dir: Path, profs: dict, ncu: str | None, python: str, ext_dir: Path,
                   timeout: float, gpu: str | None) -> None:
    from kernelskill.errors import KernelSkillError
    from kernelskill.profiling.ncu import parse_ncu_csv
    from kernelskill.review.work import ProblemWork

    changes = expected_changes(kb, r.method)
    wanted = raw_metrics(kb, [f for f, _ in changes])
    r.metrics = available(wanted, recorded_metric_names())
    work_file = case_dir / "problem_work.json"
    work = ProblemWork.model_validate_json(work_file.read_text()) if work_file.is_file() else None
    values: dict[str, dict[str, object]] = {}
    why = "" if ncu else "ncu skipped (--skip-ncu)"
    texts: dict[str, str] = {}
    if ncu is not None:
        t0 = time.monotonic()
        status, text = run_ncu(ncu, case_dir, r.metrics, python, ext_dir, timeout)  # may drop unknown metrics
        r.ncu = {"status": status, "seconds": round(time.monotonic() - t0, 1)}
        if text is not None:
            texts = split_variants(text) or {}
            if not texts:
                r.ncu["status"] = f"the report does not split at one {MARKER} launch into before and after"
        if not texts:
            why = f"ncu: {r.ncu['status']}"
            r.notes.append(why)
    for v in VARIANTS:
        report = None
        if v in texts:
            try:
                per_kernel = parse_ncu_csv(texts[v], source=f"{case_dir / 'ncu.csv'} ({v})")
                r.ncu[f"{v}_kernels"] = [{"name": k.name[:120], "launches": k.launches, "time_us": k.time_ns / 1e3}
                                         for k in per_kernel.kernels]  # fmt: skip
                report = parse_ncu_csv(merge_launches(texts[v]), source=f"{case_dir.name} {v}, launches merged")
            except KernelSkillError as exc:
                why = f"ncu {v}: unreadable CSV: {exc}"
                r.notes.append(why)
        values[v] = field_values(kb, report, profs.get(v), work, r.time_us.get(v), gpu)
    r.fields = check_fields(changes, values, why)


# ---- the table ------------------------------------------------------------------------------------------------------


def _num(x: float | None) -> str:
    if x is None:
        return "?"
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-2:
        return f"{x:.3g}"
    return f"{x:.4g}"


def table(results: list[Result], title: str, cpu: bool = False) -> str:
    lines = [f"### {title}", "", "| case | method | before us | after us | speedup | expected fields: before -> after "
             "(expected, agrees) | verdict |", "|---|---|---:|---:|---:|---|---|"]  # fmt: skip
    for r in results:
        fields = "<br>".join(
            f"{c.field}: {_num(c.before)} -> {_num(c.after)} ({c.expected}, "
            f"{'yes' if c.agrees else 'no' if c.agrees is False else 'unknown'})" for c in r.fields
        ) or "-"
        speed = f"{r.speedup:.2f}x" if r.speedup is not None else "-"
        lines.append(f"| {r.case} | {r.method} | {_num(r.time_us.get('before'))} | {_num(r.time_us.get('after'))} | "
                     f"{speed} | {fields} | {r.verdict} |")  # fmt: skip
    if cpu:
        ok = sum(r.verdict.startswith("cpu smoke: before and after correct") for r in results)
        return "\n".join(lines + ["", f"cpu smoke run: {ok} of {len(results)} pairs ran and were correct (the rest "
                                       "need a GPU); no fields, times not meaningful."]) + "\n"
    agree = sum(r.verdict.startswith("agrees") for r in results)
    faster = sum(r.speedup is not None and r.speedup >= FASTER for r in results)
    lines += ["", f"{agree} of {len(results)} cases agree; {faster} of {len(results)} after-kernels are at least "
              f"{FASTER:.2f}x faster."]  # fmt: skip
    return "\n".join(lines) + "\n"


# ---- main ------------------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="output folder (created)")
    p.add_argument("--only", nargs="+", choices=sorted(AFTER), metavar="CASE", help="check only these cases")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for the whole run (default 300)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a smoke run (no ncu)")
    p.add_argument("--skip-ncu", action="store_true", help="time and check only; fields from the profiler alone")
    p.add_argument("--samples", type=int, default=30, help="timed samples per variant (default 30, at least 20)")
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 4), help="parallel builds in phase 1")
    p.add_argument("--ncu", default="ncu", help="ncu executable (default: ncu on PATH)")
    p.add_argument("--python", default=sys.executable, help="python for builds and ncu targets (default: this one)")
    p.add_argument("--timeout", type=float, default=180.0, help="time limit of one build or ncu run (default 180)")
    args = p.parse_args(argv)
    if args.samples < 20 and args.device == "cuda":
        p.error("--samples: at least 20 on the GPU")
    if args.budget <= 0 or args.timeout <= 0 or args.jobs < 1 or args.samples < 1:
        p.error("--budget, --timeout, --jobs and --samples must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_ncu_target"]:
        return ncu_target(Path(argv[1]))
    args = parse_args(argv)
    deadline = time.monotonic() + args.budget
    cpu = args.device == "cpu"
    if cpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton
    from kernelskill.memory import load_knowledge

    kb = load_knowledge()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    ext_dir = (out / "torch_extensions").resolve()
    ext_dir.mkdir(exist_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(ext_dir)  # this process loads what phase 1 built
    cases = [c for c in CASES if c.name in AFTER and (not args.only or c.name in args.only)]
    results = {c.name: Result(c.name, AFTER[c.name].method, AFTER[c.name].note) for c in cases}
    runnable = []
    for c in cases:
        if cpu and "load_inline" in c.candidate + AFTER[c.name].candidate:
            results[c.name].status = "skipped: CUDA candidate, needs a GPU (--device cpu)"
        else:
            runnable.append(c)
    ncu = None
    if not cpu and not args.skip_ncu:
        ncu = shutil.which(args.ncu) or (args.ncu if Path(args.ncu).is_file() else None)
        if ncu is None:
            print(f"error: ncu not found ({args.ncu!r}); put Nsight Compute on PATH, pass --ncu or use --skip-ncu",
                  file=sys.stderr)  # fmt: skip
            return 2
    gpu = None
    if not cpu:
        import torch

        if not torch.cuda.is_available():
            print("error: no CUDA device; use --device cpu for the smoke run", file=sys.stderr)
            return 2
        gpu = torch.cuda.get_device_name()
    dirs = {c.name: write_case(c, AFTER[c.name], out) for c in runnable}
    t0 = time.monotonic()
    if not cpu:
        print(f"phase 1: {len(runnable)} cases, {args.jobs} jobs: problem work and CUDA builds", flush=True)
        limit = max(1.0, min(args.timeout, deadline - time.monotonic()))
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            notes = pool.map(lambda c: prepare(dirs[c.name], args.python, ext_dir, limit), runnable)
            for c, n in zip(runnable, notes, strict=True):
                results[c.name].notes += n
        print(f"phase 1 done in {time.monotonic() - t0:.0f} s", flush=True)
    phase1_s = time.monotonic() - t0
    for c in runnable:
        r = results[c.name]
        if any("build failed" in n or "did not finish" in n for n in r.notes):
            r.status = "error: " + next(n for n in r.notes if "CUDA build" in n)
            continue
        remaining = deadline - time.monotonic()
        need = 5.0 + (NCU_CASE_S if ncu else 0.0)
        if remaining < need:
            r.status = f"skipped: budget of {args.budget:.0f} s used ({remaining:.0f} s left, ~{need:.0f} s needed)"
            continue
        t1 = time.monotonic()
        try:
            profs = measure(r, dirs[c.name], args.device, args.samples, AFTER[c.name].cpu_inputs)
            r.status = "ok"
            if not cpu:
                timeout = max(5.0, min(args.timeout, (deadline - time.monotonic()) / 2))
                profile_fields(r, kb, dirs[c.name], profs, ncu, args.python, ext_dir, timeout, gpu)
            else:
                r.notes.append("cpu smoke run: the times are the Triton interpreter's or PyTorch's on the CPU, "
                               "no fields")  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - one case failing must not hide the others
            r.status = f"error: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc) else ''}"
        r.verdict = verdict(r, cpu)
        print(f"[{c.name}] {r.verdict} ({time.monotonic() - t1:.1f} s)", flush=True)
    for r in results.values():
        r.verdict = r.verdict or verdict(r, cpu)
    ordered = [results[c.name] for c in cases]
    title = f"method check on {gpu or 'the CPU (smoke run)'}"
    text = table(ordered, title, cpu)
    (out / "method_check.md").write_text(text)
    (out / "method_check.json").write_text(json.dumps({
        "device": gpu or "cpu", "seconds": round(args.budget - (deadline - time.monotonic()), 1),
        "phase1_seconds": round(phase1_s, 1), "samples": args.samples, "tolerance": TOLERANCE,
        "same_band": {"relative": SAME_REL, "percent_points": SAME_ABS_PCT}, "faster_from": FASTER,
        "results": [asdict(r) for r in ordered]}, indent=2))  # fmt: skip
    print(text)
    print(f"wrote {out / 'method_check.md'} and {out / 'method_check.json'}")
    return 0 if all(r.status == "ok" or r.status.startswith("skipped") for r in ordered) else 1


if __name__ == "__main__":
    sys.exit(main())
