"""The runner's pure parts, without containers: scope rules on agents' patches, scenario selection, budgets, what
agents are told, the run folder's settings check, and the package's place among the layers."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from helpers.checkout import ROOT

from asyncodebench.agents import runfolder
from asyncodebench.agents.prompts import Handoff, instruction
from asyncodebench.agents.runner import NoScenarioError, select
from asyncodebench.agents.scope import file_sections, out_of_scope, restrict
from asyncodebench.agents.team import Scenario, budget
from asyncodebench.dataset.rows import load_published


def changed(path: str) -> str:
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"


CORE, TEST = changed("minicache/core.py"), changed("tests/test_core.py")
NEW = "diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+x\n"
RENAME = ("diff --git a/minicache/core.py b/elsewhere.py\nsimilarity index 100%\nrename from minicache/core.py\n"
          "rename to elsewhere.py\n")


@pytest.fixture(scope="module")
def rows(offline_demo_dataset: Path) -> Any:
    return load_published(str(offline_demo_dataset)).rows


def scenario(rows: Any, protocol: str) -> Scenario:
    (chosen,), _ = select(rows, [f"*/{protocol}"])
    return chosen


def test_a_patch_is_cut_into_one_section_per_file() -> None:
    assert file_sections(CORE + TEST + NEW) == [CORE, TEST, NEW]
    assert file_sections("") == []


def test_restrict_keeps_only_sections_inside_the_writable_paths() -> None:
    writable = ("minicache/core.py", "minicache/api.py")
    assert restrict(CORE + TEST + NEW, writable) == (CORE, ("tests/test_core.py", "notes.txt"))
    assert restrict(RENAME, writable) == ("", ("elsewhere.py",))  # a rename out of scope goes whole
    assert restrict(NEW, ("notes.txt", "minicache/")) == (NEW, ())
    assert out_of_scope(CORE + NEW, ("minicache/",)) == ("notes.txt",)


def test_patterns_choose_scenarios_of_every_protocol(rows: Any) -> None:
    chosen, skipped = select(rows, ["asyncodebench-demo:*"])
    assert [s.protocol for s in chosen] == ["single", "serial_specialists", "async_private", "caid_manager",
                                            "async_manager"]
    assert skipped == []
    chosen, skipped = select(rows, ["*/single", "*/async_private"])
    assert [s.protocol for s in chosen] == ["single", "async_private"] and skipped == []


@pytest.mark.parametrize("patterns, message", [
    (["nothing:*"], "chose no scenario"),
])
def test_patterns_that_choose_nothing_runnable_say_what_there_is(rows: Any, patterns: list[str], message: str) -> None:
    with pytest.raises(NoScenarioError, match=message) as caught:
        select(rows, patterns)
    assert "asyncodebench-demo:minicache/single" in str(caught.value)


def test_the_budget_is_the_rows_unless_overridden(rows: Any) -> None:
    single = scenario(rows, "single")
    assert single.row["budget"]["unit"] == "model_response"
    assert budget(single, None) == single.row["budget"]["subagent_max_iterations"] == 100
    assert budget(single, 7) == 7


def test_an_agent_is_told_its_paths_contracts_tests_and_handoffs(rows: Any) -> None:
    serial = scenario(rows, "serial_specialists")
    api = serial.row["assignments"][1]
    text = instruction(serial.spec, serial.task_row, serial.row, api,
                       (Handoff("core_agent", "cache core specialist", ("minicache/core.py",), "clean",
                                "agent_finish"),))
    assert serial.task_row["problem_statement"].strip()[:200] in text
    assert "- minicache/api.py\n- minicache/__init__.py\n" in text
    assert "your whole artifact is then rejected" in text
    assert "- core_agent (cache core specialist) owns minicache/core.py, minicache/__init__.py" in text
    assert text.count("minicache.core_to_api.") == 3  # the three contracts it consumes
    assert "python3 -m pytest -q -p no:cacheprovider tests/test_api.py" in text
    assert "- core_agent (cache core specialist): clean, changed minicache/core.py" in text
    assert "tests/test_core.py" not in text.split("## Checking your work")[1]  # only its own tests


def test_a_single_agent_is_told_its_edits_elsewhere_are_not_kept(rows: Any) -> None:
    single = scenario(rows, "single")
    text = instruction(single.spec, single.task_row, single.row, single.row["assignments"][0])
    assert "it is not kept" in text and "## Your team" not in text
    assert text.count("minicache.core_to_api.") == 3


def test_a_run_folder_refuses_other_settings(tmp_path: Path) -> None:
    runfolder.check_settings(tmp_path, {"model": "a", "budget": None})
    runfolder.check_settings(tmp_path, {"model": "a", "budget": None})  # the same: resumes
    with pytest.raises(runfolder.SettingsChangedError, match="budget: was None, now 3"):
        runfolder.check_settings(tmp_path, {"model": "a", "budget": 3})


def test_scenario_folders_are_safe_and_distinct(tmp_path: Path) -> None:
    one = runfolder.scenario_folder(tmp_path, "asyncodebench-demo:minicache/single")
    other = runfolder.scenario_folder(tmp_path, "asyncodebench-demo:minicache:single")
    assert one != other and one.parent == other.parent == tmp_path / "scenarios"
    assert one.name.startswith("asyncodebench-demo-minicache-single__")


def test_no_lower_layer_imports_the_agents_package() -> None:
    offenders = []
    for path in (ROOT / "asyncodebench").rglob("*.py"):
        if "agents" in path.relative_to(ROOT / "asyncodebench").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("asyncodebench.agents")]
    assert offenders == []
