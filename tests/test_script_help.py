"""`--help` of every script answers before the kit's heavy dependencies are loaded: arguments are parsed first,
the rest imported after (figures: scripts/bench_help.py). Checked by what is imported, not by time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.checkout import ROOT, script_env

# Each takes tenths of a second or more to import, and none is needed to parse arguments.
HEAVY = ("datasets", "pandas", "pyarrow", "docker", "jsonschema", "ray", "matplotlib", "huggingface_hub")
SCRIPTS = sorted(p.name for p in (ROOT / "scripts").glob("*.py"))

CHECK = """
import json, runpy, sys
sys.argv = [sys.argv[1], "--help"]
sys.path.insert(0, str(__import__("pathlib").Path(sys.argv[0]).parent))
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as stop:
    code = stop.code
else:
    code = None
print(json.dumps({"code": code, "heavy": sorted(m for m in HEAVY if m in sys.modules)}))
"""


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_loads_no_heavy_dependency(script: str) -> None:
    check = f"HEAVY = {HEAVY!r}\n{CHECK}"
    done = subprocess.run([sys.executable, "-c", check, str(ROOT / "scripts" / script)], cwd=ROOT, env=script_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    *shown, last = done.stdout.strip().splitlines()
    result = json.loads(last)
    assert result == {"code": 0, "heavy": []}, (result, done.stderr[-2000:])
    assert "usage:" in "\n".join(shown), done.stdout[-2000:]
