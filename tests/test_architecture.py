"""docs/architecture.svg is the code's import graph (scripts/draw_architecture.py --check), and the check fails on
what it is there to catch: an import that runs up a layer, one between two units of one row, a circle of modules,
a stale picture."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from helpers.checkout import ROOT, SCRIPTS, script_env

SCRIPT = SCRIPTS / "draw_architecture.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("draw_architecture", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_picture_is_current_and_no_import_breaks_the_layers() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, env=script_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_real_graph_has_the_imports_the_design_expects() -> None:
    imports = _script().read_imports()
    assert imports.between_units[("run", "harness")] > 0 and imports.between_units[("reports", "run")] > 0
    assert ("harness", "run") not in imports.between_units and ("scoring", "harness") not in imports.between_units


def test_the_check_finds_an_upward_import_a_sideways_one_and_a_circle() -> None:
    script = _script()
    found = script.problems(script.Imports(
        between_units=Counter({("scoring", "run"): 1, ("agents", "reports"): 2, ("run", "harness"): 3}),
        between_modules={(f"asyncodebench.{a}", f"asyncodebench.{b}")
                         for a, b in (("run.a", "run.b"), ("run.b", "run.c"), ("run.c", "run.a"), ("run.a", "files"))}))
    assert found == [
        "agents imports reports: agents is on row 6, reports on row 6 (only lower rows)",
        "scoring imports run: scoring is on row 2, run on row 5 (only lower rows)",
        "import circle: asyncodebench.run.a -> asyncodebench.run.b -> asyncodebench.run.c -> asyncodebench.run.a",
    ]


def test_a_stale_picture_fails_the_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = _script()
    stale = tmp_path / "architecture.svg"
    stale.write_text(script.draw(script.read_imports()).replace("agents/", "agent/"), encoding="utf-8")
    monkeypatch.setattr(script, "PICTURE", stale)
    assert script.main(["--check"]) == 1
    assert script.main([]) == 0 and script.main(["--check"]) == 0  # rewritten, then current


def test_the_quickstart_s_layers_table_names_every_unit_of_the_picture() -> None:
    table = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8").split("## The library's layers")[1]
    first_cells = {line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| `")}
    named = {cell.strip("` ").removesuffix("/").removesuffix(".py") for row in first_cells for cell in row.split(",")}
    units = {unit for row in _script().LAYERS for unit in row}
    assert units - named == set(), "add a row for each to docs/quickstart.md's layers table"
