"""Test-target lists that hold pytest options (cookiecutter's `--deselect=...`, marshmallow's `addopts=`).

The lists are upstream facts and keep their options; the statement must not present an option as a test file, the
preparation must restore only files, and the evaluator must still pass every option to pytest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from asyncodebench.dataset.rows import load_published
from asyncodebench.dataset.statement import compose_statement
from asyncodebench.dataset.targets import is_option, target_files, target_options
from asyncodebench.dataset.validation import in_test_targets
from asyncodebench.harness.evaluation import Workbench, evaluator_args, first_path
from asyncodebench.harness.spec import TaskSpec

ROOT = Path(__file__).resolve().parent.parent
WITH_OPTIONS = {"asyncodebench:cookiecutter": "--deselect=tests/test_prompt.py::",
                "asyncodebench:marshmallow": "addopts="}


@pytest.fixture(scope="module")
def rows() -> Any:
    return load_published(str(ROOT)).rows


def spec_of(rows: Any, task_id: str) -> TaskSpec:
    (task,) = [t for t in rows.tasks if t["task_id"] == task_id]
    return TaskSpec.from_rows(task, rows.dependencies)


def test_only_the_two_tasks_hold_options(rows: Any) -> None:
    holding = {t["task_id"] for t in rows.tasks if target_options(t["test_targets"])}
    assert holding == set(WITH_OPTIONS)


@pytest.mark.parametrize("task_id", sorted(WITH_OPTIONS))
def test_the_statement_lists_options_apart_from_test_files(task_id: str) -> None:
    source = yaml.safe_load((ROOT / "data" / "tasks" / f"{task_id.split(':')[1]}.yaml").read_text())
    tests = compose_statement(source, "prose").split("## Tests", 1)[1].split("## How your work", 1)[0]
    files_part, settings_part = tests.split("pytest settings, which are not files", 1)
    listed = [line[3:-1] for line in files_part.splitlines() if line.startswith("- `")]
    assert listed == list(target_files(source["test_targets"])) and not any(is_option(e) for e in listed)
    assert [line[3:-1] for line in settings_part.splitlines() if line.startswith("- `")] == \
        list(target_options(source["test_targets"]))
    assert WITH_OPTIONS[task_id] in settings_part


@pytest.mark.parametrize("task_id", sorted(WITH_OPTIONS))
def test_preparation_restores_files_only_and_the_evaluator_keeps_every_option(rows: Any, task_id: str) -> None:
    spec = spec_of(rows, task_id)
    (task,) = [t for t in rows.tasks if t["task_id"] == task_id]
    assert spec.protected_paths == target_files(task["test_targets"]) and spec.protected_paths
    bench = Workbench(client=None, spec=spec, run_id="unused", settings=None, overlays=(), base="unused")  # type: ignore[arg-type]
    config = json.loads(bench.inputs(b"")["prepare.json"])
    assert not [p for p in config["protected_paths"] if is_option(p)]
    assert set(target_files(task["test_targets"])) <= set(config["protected_paths"])
    argv = evaluator_args(spec)
    for option in target_options(task["test_targets"]):
        assert option in argv  # `--deselect=...` as given; `addopts=` as the value of `-o`
    if "addopts=" in task["test_targets"]:
        assert ("-o", "addopts=") in zip(argv, argv[1:])
    assert first_path(spec.test_targets) == target_files(task["test_targets"])[0]


@pytest.mark.parametrize("task_id", sorted(WITH_OPTIONS))
def test_probes_are_checked_against_test_files_not_options(rows: Any, task_id: str) -> None:
    (task,) = [t for t in rows.tasks if t["task_id"] == task_id]
    for option in target_options(task["test_targets"]):
        assert not in_test_targets(option, task["test_targets"])
    probes = [n for d in rows.dependencies if d["task_id"] == task_id for n in d["upstream_probe_tests"]]
    assert probes and all(in_test_targets(n.split("::", 1)[0], task["test_targets"]) for n in probes)


def test_the_tests_section_says_where_restored_files_come_from(rows: Any) -> None:
    """The preparation restores test targets from the canonical state, the base with the overlays applied (the
    overlays are in its inputs, applied before the patch); the generated text says so for the 13 tasks with
    overlays, and says the base revision for the others. TVM 20107's overlays add two of its five targets."""
    overlaid = 0
    for task in rows.tasks:
        spec = TaskSpec.from_rows(task, rows.dependencies)
        overlays = tuple((path, b"") for path, _ in spec.overlays)
        bench = Workbench(client=None, spec=spec, run_id="unused", settings=None, overlays=overlays,  # type: ignore[arg-type]
                          base="unused")
        config = json.loads(bench.inputs(b"")["prepare.json"])
        tests = task["problem_statement"].split("\n## Tests\n", 1)[1].split("\n## How your work", 1)[0]
        said = " ".join(tests.split())
        if spec.overlays:
            overlaid += 1
            assert len(config["overlays"]) == len(spec.overlays)
            assert "restores these test files and folders as they are at the base revision with the task's " \
                   "overlay patches applied" in said, task["task_id"]
        else:
            assert not config["overlays"]
            assert "restores these test files and folders from the base revision and removes" in said, task["task_id"]
    assert overlaid == 13
