"""Row facts that name upstream things, checked mechanically over every row, without network.

Each snapshot of `expected_test_counts` names the commit it was measured at in its `source_ref`; that commit must
exist in the task's upstream repository and be the base, the reference (the base's parent) or a named later commit
whose test-file difference is stated. The resolved commits are recorded in tests/data/upstream_commits.json (read
from the repositories, as the facts file is). And an image recipe that adds a requirement beyond the row's and the
library's own (the packages its header explains in parentheses) must have the row say so in
`environment_requirements`: a run without it measures something else (filesystem_spec's conftest.py skips the
whole session without `requests`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "data" / "tasks"
RECORD = json.loads((Path(__file__).parent / "data" / "upstream_commits.json").read_text())["tasks"]
SOURCES = {p.stem: yaml.safe_load(p.read_text()) for p in sorted(TASKS.glob("*.yaml")) if p.name.count(".") == 1}
RECIPES = sorted(p.name[:-len(".image.yaml")] for p in TASKS.glob("*.image.yaml"))


def named_commit(source_ref: str) -> str:
    """The commit id (full or a prefix) or public tag a source_ref names."""
    tag = re.search(r"public-tag:(\S+)", source_ref)
    if tag:
        return tag.group(1)
    found = re.search(r"[0-9a-f]{8,40}", source_ref)
    assert found, f"source_ref names no commit: {source_ref!r}"
    return found.group(0)


def test_every_row_with_snapshots_is_recorded() -> None:
    with_snapshots = {name for name, task in SOURCES.items() if task["expected_test_counts"]}
    assert with_snapshots == set(RECORD) and len(SOURCES) == 19


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_snapshot_names_a_commit_of_the_upstream_repository(name: str) -> None:
    task = SOURCES[name]
    if not task["expected_test_counts"]:
        assert name not in RECORD
        return
    record = RECORD[name]
    assert record["repository"] == task["repository_url"] and record["base"] == task["base_revision"]
    assert set(record["snapshots"]) == {s["snapshot_id"] for s in task["expected_test_counts"]}
    for snapshot in task["expected_test_counts"]:
        resolved = record["snapshots"][snapshot["snapshot_id"]]
        named = named_commit(snapshot["source_ref"])
        # The name in the row is the recorded one and, for an id, a prefix of the commit that exists upstream.
        assert resolved["names"] == named, (snapshot["snapshot_id"], snapshot["source_ref"])
        assert re.fullmatch(r"[0-9a-f]{40}", resolved["commit"])
        if not snapshot["source_ref"].count("public-tag:"):
            assert resolved["commit"].startswith(named), f"{snapshot['source_ref']} is not {resolved['commit']}"


@pytest.mark.parametrize("name", sorted(RECORD))
def test_each_snapshot_commit_is_the_base_the_reference_or_a_later_one_with_its_difference(name: str) -> None:
    record = RECORD[name]
    for snapshot_id, resolved in record["snapshots"].items():
        relation = resolved["relation"]
        if relation == "base":
            assert resolved["commit"] == record["base"], snapshot_id
        elif relation == "reference":
            assert resolved["commit"] == record["reference"], snapshot_id
        else:
            assert re.fullmatch(r"later: \d+ commits after the reference", relation), (snapshot_id, relation)
            assert resolved["test_file_difference"], snapshot_id
    assert record["reference"] != record["base"]


def recipe_extras(recipe_text: str) -> list[str]:
    """The packages a recipe's header explains in parentheses: `# (pytest-cov freezegun: why)`."""
    extras: list[str] = []
    for line in recipe_text.splitlines():
        found = re.match(r"# \(([A-Za-z0-9_. -]+):", line)
        if found:
            extras += found.group(1).split()
    return extras


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("name", RECIPES)
def test_a_recipes_extra_requirements_are_in_the_rows_requirements(name: str) -> None:
    recipe = (TASKS / f"{name}.image.yaml").read_text()
    pins = {normalized(re.split(r"[=<>;! ]", r, maxsplit=1)[0]) for r in yaml.safe_load(recipe)["requirements"]}
    listed = {normalized(re.split(r"[=<>;! ,]", r, maxsplit=1)[0]) for r in SOURCES[name]["environment_requirements"]}
    for extra in recipe_extras(recipe):
        assert normalized(extra) in pins, f"{name}: the header names {extra}, the recipe does not install it"
        assert normalized(extra) in listed, f"{name}: the image adds {extra}; environment_requirements must say so"


def test_the_extras_reader_finds_the_known_extras() -> None:
    """The parenthesized header notes are where the recipes say what they add (an empty find would pass above)."""
    found: dict[str, Any] = {n: recipe_extras((TASKS / f"{n}.image.yaml").read_text()) for n in RECIPES}
    assert found["filesystem_spec"] == ["requests"] and found["cookiecutter"] == ["pytest-cov", "freezegun"]
    assert sum(bool(v) for v in found.values()) == 7
