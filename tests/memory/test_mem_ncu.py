"""Parsing `ncu --csv --page raw` output: layout, units, thousands separators, grouping, errors."""

from __future__ import annotations

import pytest

from kernelskill.errors import KernelSkillError
from kernelskill.profiling.ncu import canonical_unit, load_ncu_csv, parse_ncu_csv, parse_number
from memhelpers import NCU_DATA

HEAD = '"ID","Process ID","Kernel Name","Block Size","gpu__time_duration.sum","dram__bytes_read.sum",' \
       '"sm__throughput.avg.pct_of_peak_sustained_elapsed","launch__registers_per_thread"\n'  # fmt: skip
UNITS = '"","","","","usecond","Mbyte","%","register/thread"\n'


def row(i: int, name: str, us: str, mb: str, pct: str, regs: str = "32") -> str:
    return f'"{i}","7","{name}","(256, 1, 1)","{us}","{mb}","{pct}","{regs}"\n'


@pytest.mark.parametrize(
    ("unit", "canonical", "factor"),
    [
        ("nsecond", "nsecond", 1.0), ("usecond", "nsecond", 1e3), ("msecond", "nsecond", 1e6),
        ("second", "nsecond", 1e9), ("byte", "byte", 1.0), ("Kbyte", "byte", 1e3), ("Mbyte", "byte", 1e6),
        ("Gbyte", "byte", 1e9), ("Kibyte", "byte", 1024.0), ("Gbyte/second", "byte/nsecond", 1.0),
        ("Tbyte/second", "byte/nsecond", 1e3), ("cycle/usecond", "cycle/nsecond", 1e-3), ("Mcycle", "cycle", 1e6),
        ("%", "%", 1.0), ("register/thread", "register/thread", 1.0), ("", "", 1.0), ("sector", "sector", 1.0),
        # spellings of ncu 2025.3 (from the units line of the H200 captures in tests/data/ncu/h200/)
        ("ns", "nsecond", 1.0), ("us", "nsecond", 1e3), ("ms", "nsecond", 1e6), ("s", "nsecond", 1e9),
        ("Tbyte/s", "byte/nsecond", 1e3), ("Gbyte/s", "byte/nsecond", 1.0), ("Mbyte/s", "byte/nsecond", 1e-3),
        ("byte/s", "byte/nsecond", 1e-9), ("sector/ns", "sector/nsecond", 1.0), ("sector/us", "sector/nsecond", 1e-3),
        ("sector/ms", "sector/nsecond", 1e-6), ("Ghz", "hz", 1e9), ("Mhz", "hz", 1e6),
        ("Kbyte/block", "byte/block", 1e3), ("byte/block", "byte/block", 1.0), ("byte/sector", "byte/sector", 1.0), ("sectors", "sector", 1.0),
        ("inst/cycle", "inst/cycle", 1.0), ("Kbyte/cycle", "byte/cycle", 1e3), ("pass", "pass", 1.0),
        ("branches", "branches", 1.0), ("SM", "SM", 1.0),
    ],
)  # fmt: skip
def test_canonical_units(unit, canonical, factor):
    got_unit, got_factor = canonical_unit(unit)
    assert got_unit == canonical and got_factor == pytest.approx(factor)


@pytest.mark.parametrize(("text", "value"), [("1,234,567", 1234567.0), ("12.50", 12.5), ("-3", -3.0), ("", None),
                                              ("n/a", None), ("(256, 1, 1)", None), ("nan", None), ("inf", None)])
def test_parse_number(text, value):
    assert parse_number(text) == value


def test_grouping_sums_counters_and_time_weights_the_rest():
    text = HEAD + UNITS + row(0, "k_a", "1,000", "2", "10") + row(1, "k_b", "500", "1", "90") \
        + row(2, "k_a", "3,000", "4", "50", regs="40")  # fmt: skip
    report = parse_ncu_csv(text)
    assert [k.name for k in report.kernels] == ["k_a", "k_b"]  # hottest first
    a = report.hottest
    assert a.launches == 2 and a.time_ns == pytest.approx(4_000_000)
    assert a.time_share == pytest.approx(4000 / 4500)
    assert a.number("dram__bytes_read.sum") == pytest.approx(6e6)  # .sum counters add up, Mbyte -> byte
    # other metrics: time-weighted mean (1000 us at 10 %, 3000 us at 50 %)
    assert a.number("sm__throughput.avg.pct_of_peak_sustained_elapsed") == pytest.approx(40.0)
    assert a.number("launch__registers_per_thread") == pytest.approx(38.0)
    assert a.metrics["gpu__time_duration.sum"].unit == "nsecond"
    assert a.block_size == "(256, 1, 1)"


# (file, raw gpu__time_duration.sum of each launch as ncu 2025.3 wrote it, its unit)
REAL_TIMES = [("streaming_elementwise", ["131.584000", "130.080000"], "us"),
              ("tiled_gemm_fp32", ["3.236352", "3.235264"], "ms")]  # fmt: skip


@pytest.mark.parametrize(("name", "raw", "unit"), REAL_TIMES, ids=[r[0] for r in REAL_TIMES])
def test_real_ncu_2025_time_units(name, raw, unit):
    report = load_ncu_csv(NCU_DATA / "h200" / f"{name}.csv")
    k = report.hottest
    scale = {"us": 1e3, "ms": 1e6}[unit]
    assert k.launches == 2 and k.time_ns == pytest.approx(sum(float(v) for v in raw) * scale)
    assert k.metrics["gpu__time_duration.sum"].unit == "nsecond"
    if name == "streaming_elementwise":  # 64 Mi floats in and out: 2 x 268 MB per launch at ~3.9 TB/s
        assert k.time_ns / k.launches == pytest.approx(130_832, rel=1e-6)
        assert k.number("dram__bytes_read.sum") == pytest.approx(2 * 268.4e6, rel=0.01)  # "Mbyte", summed
        assert k.number("dram__bytes.sum.per_second") == pytest.approx(3.92e3, rel=0.01)  # "Tbyte/s" -> byte/ns
        assert k.metrics["launch__shared_mem_per_block_static"].unit == "byte/block"
        assert k.number("smsp__cycles_elapsed.avg.per_second") == pytest.approx(1.96e9, rel=0.02)  # "Ghz"


def test_every_real_capture_parses_with_known_units():
    files = sorted((NCU_DATA / "h200").glob("*.csv"))
    # 7 from scripts/capture_ncu.py, 34 from scripts/capture_decision_bench.py (13 classic cases, 21 LLM kernels)
    assert len(files) == 41
    for path in files:
        report = load_ncu_csv(path)
        assert report.notes == [] and all(k.time_ns > 0 for k in report.kernels)
        # every time-like metric was converted to nanoseconds (none kept ncu's display unit)
        for k in report.kernels:
            assert not {m.unit for m in k.metrics.values()} & {"us", "ms", "ns", "s", "usecond", "msecond"}


def test_an_unknown_time_unit_is_an_error_not_a_guess():
    text = HEAD + UNITS.replace("usecond", "fortnight") + row(0, "k", "1", "1", "1")
    with pytest.raises(KernelSkillError, match="has unit 'fortnight', not a time"):
        parse_ncu_csv(text, source="x.csv")


def test_text_values_are_kept_from_the_longest_launch():
    text = HEAD.replace("launch__registers_per_thread", "launch__func_cache_config") + UNITS.replace(
        "register/thread", "") + row(0, "k", "10", "1", "5", regs="CachePreferNone")  # fmt: skip
    k = parse_ncu_csv(text).hottest
    assert k.metrics["launch__func_cache_config"].value == "CachePreferNone"
    assert k.number("launch__func_cache_config") is None


def test_lines_before_the_header_are_skipped_and_noted():
    report = load_ncu_csv(NCU_DATA / "synthetic_sol_only.csv")
    assert report.notes and "skipped 1 line" in report.notes[0]
    assert report.hottest.time_ns == pytest.approx(116_200)


def test_every_synthetic_capture_parses():
    files = sorted(NCU_DATA.glob("synthetic_*.csv"))
    assert len(files) >= 8
    for path in files:
        report = load_ncu_csv(path)
        assert report.kernels and all(k.time_ns > 0 for k in report.kernels)
        assert report.kernels == sorted(report.kernels, key=lambda k: -k.time_ns)


def test_tiny_launch_capture_groups_48_launches_into_4_kernels():
    report = load_ncu_csv(NCU_DATA / "synthetic_many_tiny_launches.csv")
    assert len(report.kernels) == 4 and sum(k.launches for k in report.kernels) == 48
    assert report.hottest.name.startswith("void at::native::vectorized_elementwise_kernel<4, at::native::sin")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello\nworld\n", 'no header line starting with "ID"'),
        ('"ID","Kernel Name","sm__throughput.avg.pct_of_peak_sustained_elapsed"\n"","","%"\n"0","k","5"\n',
         "no gpu__time_duration.sum column"),
        ('"ID","Process ID","gpu__time_duration.sum"\n"","","nsecond"\n"0","1","5"\n', 'no "Kernel Name" column'),
        (HEAD + UNITS, "no kernel rows"),
        (HEAD + UNITS + row(0, "k", "1", "1", "1") + '"1","7","k"\n', "line 4 has 3 cells but the header has 8"),
        (HEAD + UNITS + row(0, "k", "n/a", "1", "1"), "has no gpu__time_duration.sum value"),
        (HEAD + UNITS.replace("usecond", "byte") + row(0, "k", "1", "1", "1"), "not a time"),
    ],
)  # fmt: skip
def test_malformed_files_give_a_clear_error(text, message):
    with pytest.raises(KernelSkillError) as info:
        parse_ncu_csv(text, source="x.csv")
    assert message in str(info.value) and str(info.value).startswith("x.csv: ")


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(KernelSkillError, match="cannot read the ncu CSV"):
        load_ncu_csv(tmp_path / "absent.csv")
