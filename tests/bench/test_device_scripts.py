"""scripts/device/*.sh, the GPU session's calls: each parses, and every script and folder it names exists here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((REPO / "scripts" / "device").glob("*.sh"))


def test_there_are_device_scripts():
    assert {p.name for p in SCRIPTS} >= {"setup.sh", "capture.sh", "method_check.sh", "recheck.sh", "spread.sh"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_device_script_parses_and_names_what_exists(script):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    for name in re.findall(r"scripts/([a-z_]+\.py)", text):
        assert (REPO / "scripts" / name).is_file(), name
    if script.name != "setup.sh":
        assert 'source "$(dirname "$0")/setup.sh"' in text  # the wheels and PYTHONPATH, before anything runs
    for path in re.findall(r"(docs/h200/[a-z0-9_/.]+[a-z0-9_]|tests/data/[a-z0-9_/.]+[a-z0-9_])", text):
        assert (REPO / path).exists(), path
