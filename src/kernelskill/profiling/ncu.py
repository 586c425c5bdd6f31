"""Read Nsight Compute's raw CSV (`ncu --csv --page raw`) into per-kernel metrics.

Layout: one header line of column names (it starts with "ID"), one line of units (its "ID" cell is empty), then one
row per profiled kernel launch. ncu scales units for display and writes thousands separators ("1,234,567"), so
values are converted back to canonical units here: time in nanoseconds, sizes in bytes, other counts without a
prefix. Unit spellings differ across releases: ncu 2025.3 writes "us", "ms", "Mbyte", "Tbyte/s", "sector/ns",
"Ghz"; older releases wrote "usecond", "msecond", "Gbyte/second". Both are understood; a time unit that is not
understood is an error, never a silent guess.

Launches are grouped by kernel name. A kernel's time is the sum over its launches; counters (metrics whose name
ends in ".sum") are summed too, everything else (percentages, ratios, averages, launch settings) is the
time-weighted mean, so ratios of counters and per-launch figures stay meaningful. Kernels are ordered by total time:
the first is the hottest, which drives decisions; all are kept.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from pydantic import BaseModel

from kernelskill.errors import KernelSkillError

TIME_METRIC = "gpu__time_duration.sum"
NAME_COLUMNS = ("Kernel Name", "Function Name")  # "Function Name" in some older ncu releases
# Columns ncu writes before the metrics; they describe the launch, they are not metrics.
ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Function Name", "Context",
              "Stream", "Block Size", "Grid Size", "Device", "CC")  # fmt: skip

# Unit prefixes ncu uses when it scales values for display (sizes are decimal: 1 Mbyte = 10^6 bytes).
_PREFIX = {"": 1.0, "n": 1e-9, "u": 1e-6, "\u00b5": 1e-6, "\u03bc": 1e-6, "m": 1e-3, "K": 1e3, "k": 1e3, "M": 1e6,
           "G": 1e9, "T": 1e12, "P": 1e15, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}  # fmt: skip
# Base units as ncu spells them -> canonical name. Matched longest first, so "usecond" is u + second, not
# "usecond" read as "useconds" minus an "s"; "s" alone (ncu 2025: "us", "ms", "Tbyte/s") is a second.
_BASE_UNITS = {"second": "second", "s": "second", "byte": "byte", "bytes": "byte", "cycle": "cycle",
               "cycles": "cycle", "inst": "inst", "sector": "sector", "sectors": "sector", "request": "request",
               "warp": "warp", "thread": "thread", "block": "block", "hz": "hz", "Hz": "hz"}  # fmt: skip
_BASES_LONGEST_FIRST = sorted(_BASE_UNITS, key=len, reverse=True)


class MetricValue(BaseModel):
    """One metric of one kernel: a number in canonical units, or the text ncu wrote when it is not a number."""

    value: float | str
    unit: str


class KernelRecord(BaseModel):
    """All launches of one kernel (by name) in a report."""

    name: str
    launches: int
    time_ns: float
    time_share: float  # of the report's total kernel time, 0..1
    block_size: str | None = None
    grid_size: str | None = None
    metrics: dict[str, MetricValue]

    def number(self, metric: str) -> float | None:
        m = self.metrics.get(metric)
        return m.value if m is not None and isinstance(m.value, float) else None


class NcuReport(BaseModel):
    """A parsed raw CSV: kernels sorted by total time, hottest first."""

    source: str
    kernels: list[KernelRecord]
    notes: list[str] = []

    @property
    def hottest(self) -> KernelRecord:
        return self.kernels[0]


def canonical_unit(unit: str) -> tuple[str, float]:
    """('usecond' -> ('nsecond', 1000.0)); a unit ncu did not scale comes back unchanged with factor 1."""
    parts = unit.split("/")
    if not unit or len(parts) > 2:
        return unit, 1.0
    factors, names = [], []
    for part in parts:
        name, factor = _split_prefix(part.strip())
        if name == "second":  # time is kept in nanoseconds, the unit ncu uses for kernel durations
            name, factor = "nsecond", factor * 1e9
        names.append(name)
        factors.append(factor)
    factor = factors[0] / factors[1] if len(factors) == 2 else factors[0]
    return "/".join(names), factor


def _split_prefix(part: str) -> tuple[str, float]:
    for base in _BASES_LONGEST_FIRST:
        if part.endswith(base) and part[: -len(base)] in _PREFIX:
            return _BASE_UNITS[base], _PREFIX[part[: -len(base)]]
    return part, 1.0


def parse_number(text: str) -> float | None:
    """'1,234.5' -> 1234.5; '' / 'n/a' / '(256, 1, 1)' -> None."""
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return None
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def load_ncu_csv(path: str | Path) -> NcuReport:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise KernelSkillError(f"{p}: cannot read the ncu CSV: {exc.strerror or exc}") from None
    return parse_ncu_csv(text, source=str(p))


def parse_ncu_csv(text: str, source: str = "<ncu csv>") -> NcuReport:
    lines = text.splitlines()
    notes: list[str] = []
    # ncu (and the profiled program) may print lines such as "==PROF== Connected" before the table.
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') or line.startswith("ID,")), None)
    if start is None:
        raise KernelSkillError(
            f"{source}: not an `ncu --csv --page raw` table: no header line starting with \"ID\". "
            "Capture with `ncu --csv --page raw ...` (or export a report with `ncu --import R.ncu-rep --csv "
            "--page raw`)."
        )
    if start:
        notes.append(f"skipped {start} line(s) before the CSV header (ncu or program output)")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    name_col = next((header.index(c) for c in NAME_COLUMNS if c in header), None)
    if name_col is None:
        raise KernelSkillError(f"{source}: the CSV header has no \"Kernel Name\" column; is this `--page raw` output?")
    if TIME_METRIC not in header:
        raise KernelSkillError(
            f"{source}: the CSV has no {TIME_METRIC} column, so kernels cannot be ranked by time. Capture with "
            f"`--set full` (or add `--metrics {TIME_METRIC}`)."
        )
    body = rows[1:]
    units = [""] * len(header)
    had_units = bool(body and body[0] and body[0][0].strip() == "")
    if had_units:
        units = body[0] + [""] * (len(header) - len(body[0]))
        body = body[1:]
    else:
        notes.append("no units line after the header; values are read as they are")
    launches: list[dict[str, str]] = []
    for offset, row in enumerate(body):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            line_no = start + 2 + offset + int(had_units)  # 1-based, counting the header and units lines
            raise KernelSkillError(
                f"{source}: line {line_no} has {len(row)} cells but the header has {len(header)}; the file is "
                "truncated or mixed with other output"
            )
        launches.append(dict(zip(header, row, strict=True)))
    if not launches:
        raise KernelSkillError(f"{source}: the CSV has a header but no kernel rows; ncu profiled no kernel launch")
    metric_cols = [c for c in header if c not in ID_COLUMNS]
    col_units = dict(zip(header, units, strict=False))  # a short units line leaves blanks
    kernels = _aggregate(launches, header[name_col], metric_cols, col_units, source)
    return NcuReport(source=source, kernels=kernels, notes=notes)


def _aggregate(
    launches: list[dict[str, str]], name_col: str, metric_cols: list[str], col_units: dict[str, str], source: str
) -> list[KernelRecord]:
    time_unit, time_factor = canonical_unit(col_units.get(TIME_METRIC, "nsecond") or "nsecond")
    if time_unit != "nsecond":
        raise KernelSkillError(f"{source}: {TIME_METRIC} has unit {col_units.get(TIME_METRIC)!r}, not a time")
    groups: dict[str, list[tuple[float, dict[str, str]]]] = {}
    for row in launches:
        t = parse_number(row[TIME_METRIC])
        if t is None:
            raise KernelSkillError(
                f"{source}: launch ID {row.get('ID', '?')} of {row[name_col]!r} has no {TIME_METRIC} value "
                f"({row[TIME_METRIC]!r})"
            )
        groups.setdefault(row[name_col], []).append((t * time_factor, row))
    total = sum(t for g in groups.values() for t, _ in g) or 1.0
    records = []
    for name, group in groups.items():
        time_ns = sum(t for t, _ in group)
        metrics = {col: m for col in metric_cols if (m := _combine(col, col_units.get(col, ""), group)) is not None}
        longest = max(group, key=lambda g: g[0])[1]
        records.append(KernelRecord(
            name=name, launches=len(group), time_ns=time_ns, time_share=time_ns / total,
            block_size=longest.get("Block Size"), grid_size=longest.get("Grid Size"), metrics=metrics,
        ))  # fmt: skip
    records.sort(key=lambda r: r.time_ns, reverse=True)
    return records


def _combine(col: str, raw_unit: str, group: list[tuple[float, dict[str, str]]]) -> MetricValue | None:
    unit, factor = canonical_unit(raw_unit)
    numbers = [(t, parse_number(row[col])) for t, row in group]
    present = [(t, v) for t, v in numbers if v is not None]
    if present:
        if col.endswith(".sum"):
            value = sum(v for _, v in present)
        else:
            weight = sum(t for t, _ in present)
            value = sum(t * v for t, v in present) / weight if weight else sum(v for _, v in present) / len(present)
        return MetricValue(value=value * factor, unit=unit)
    # Not a number (e.g. "(256, 1, 1)", "n/a"): keep the text of the longest launch so nothing is lost.
    text = max(group, key=lambda g: g[0])[1][col].strip()
    return MetricValue(value=text, unit=unit) if text else None
