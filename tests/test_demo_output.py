"""What scripts/prepare_demo.py (the first step of scripts/run_demo.sh) prints: its own lines, no third-party
progress bars."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.checkout import ROOT, script_env

pytestmark = pytest.mark.docker


def test_preparing_the_demo_prints_only_its_own_lines(services: None, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "prepare_demo.py"), str(tmp_path / "dataset")],
                          cwd=ROOT, env=script_env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    # `datasets` draws "Creating parquet from Arrow format" bars (with \r) while it writes the rows.
    assert "\r" not in done.stderr and "Creating parquet" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("demo image 127.0.0.1:") for line in lines), lines
    assert done.stdout == f"{tmp_path / 'dataset'}\n"
