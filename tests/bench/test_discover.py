"""Finding benchmark tasks: layouts, ordering by numeric prefix, selection, and errors a user can fix."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelskill.bench.discover import discover, parse_indices, parse_levels
from kernelskill.errors import KernelSkillError


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# problem\n")
    return path


def test_kernelbench_checkout_layout_and_numeric_order(tmp_path):
    for level, names in {"level1": ["10_b.py", "2_a.py", "1_c.py"], "level2": ["1_x.py"]}.items():
        for name in names:
            touch(tmp_path / "KernelBench" / level / name)
    tasks = discover(tmp_path)
    assert [(t.level, t.index, t.name) for t in tasks] == [
        ("1", 1, "1_c"), ("1", 2, "2_a"), ("1", 10, "10_b"), ("2", 1, "1_x")]
    assert [t.name for t in discover(tmp_path, levels={"2"})] == ["1_x"]
    assert [t.name for t in discover(tmp_path, indices=parse_indices("1-2"))] == ["1_c", "2_a", "1_x"]


def test_plain_folder_is_one_level_named_after_it(tmp_path):
    touch(tmp_path / "mine" / "3_z.py")
    touch(tmp_path / "mine" / "_helper.py")  # not a task
    (task,) = discover(tmp_path / "mine")
    assert (task.level, task.index, task.name) == ("mine", 3, "3_z")


def test_same_stem_in_two_levels_gets_qualified_names(tmp_path):
    touch(tmp_path / "level1" / "1_relu.py")
    touch(tmp_path / "level2" / "1_relu.py")
    assert [t.name for t in discover(tmp_path)] == ["L1/1_relu", "L2/1_relu"]


def test_selection_parsing_and_errors(tmp_path):
    assert parse_indices("1-3,7") == {1, 2, 3, 7} and parse_indices(None) is None
    assert parse_levels("1, 2") == {"1", "2"}
    with pytest.raises(KernelSkillError, match="--tasks"):
        parse_indices("3-1")
    with pytest.raises(KernelSkillError, match="--tasks"):
        parse_indices("one")
    with pytest.raises(KernelSkillError, match="no such folder"):
        discover(tmp_path / "missing")
    touch(tmp_path / "level1" / "1_a.py")
    with pytest.raises(KernelSkillError, match="--level 3"):
        discover(tmp_path, levels={"3"})
    with pytest.raises(KernelSkillError, match="no problem files"):
        discover(tmp_path, indices={99})


def test_bench_refuses_replay_with_a_clear_message(tmp_path):
    touch(tmp_path / "p" / "1_a.py")
    r = subprocess.run([sys.executable, "-m", "kernelskill.cli", "bench", "--problems", str(tmp_path / "p"),
                        "--model", f"replay:{tmp_path}", "--device", "cpu"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "cannot replay" in r.stderr
