"""The builder and the committed Parquet files: right counts and types, reproducible bytes, the checked release
facts, and no reference solution anywhere."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from AsynCodeBench import AsynCodeBench
from asyncodebench.dataset.export import PARQUET_NAME
from asyncodebench.dataset.features import FEATURES
from asyncodebench.dataset.protocols import PROTOCOLS

ROOT = Path(__file__).resolve().parent.parent
FACTS_FILE = ROOT / "tests" / "data" / "asyncodebench-v0.4-facts.json"  # provenance: tests/data/README.md
EXPECTED_ROWS = {"tasks": 19, "scenarios": 95, "dependencies": 52}
SCENARIO_ID = re.compile(rf"^asyncodebench:[a-z0-9][a-z0-9_.-]*/({'|'.join(PROTOCOLS)})$")
GOLD_FIELD = "upstream_merge_commit_sha_gold_offline_only"


@cache
def facts() -> dict[str, Any]:
    if not FACTS_FILE.is_file():
        pytest.fail(f"the release facts are missing: expected {FACTS_FILE} (the checked facts of v0.4); restore it")
    return json.loads(FACTS_FILE.read_text(encoding="utf-8"))


@cache
def committed(config: str) -> list[dict[str, Any]]:
    return pq.read_table(ROOT / "data" / config / PARQUET_NAME).to_pylist()


def facts_tasks() -> dict[str, dict[str, Any]]:
    return {t["task_id"]: t for t in facts()["tasks"]}


def facts_dependencies() -> dict[str, dict[str, Any]]:
    return {d["dependency_id"]: d for d in facts()["dependencies"] if d["in_52_point_set"]}


@pytest.mark.parametrize("config", list(FEATURES))
def test_builder_yields_the_release_counts_with_the_declared_features(config: str, tmp_path: Path) -> None:
    builder = AsynCodeBench(config_name=config, cache_dir=str(tmp_path))
    builder.download_and_prepare()
    dataset = builder.as_dataset(split="test")
    assert len(dataset) == EXPECTED_ROWS[config]
    assert dataset.features == FEATURES[config]


def test_committed_parquet_files_hold_the_release_counts_and_the_declared_schema() -> None:
    from datasets import Features

    for config, expected in EXPECTED_ROWS.items():
        table = pq.read_table(ROOT / "data" / config / PARQUET_NAME)
        assert table.num_rows == expected, config
        assert Features.from_arrow_schema(table.schema) == FEATURES[config], config


def test_fresh_export_is_byte_identical_to_the_committed_files() -> None:
    done = subprocess.run(
        [sys.executable, "AsynCodeBench.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "byte-identical" in done.stdout


def test_task_rows_equal_the_release_facts() -> None:
    expected = facts_tasks()
    rows = committed("tasks")
    assert [r["task_id"] for r in rows] == list(expected)
    for row in rows:
        fact = expected[row["task_id"]]
        assert row["base_revision"] == fact["base_sha"], row["task_id"]
        assert row["container_image"] == fact["container_image"], row["task_id"]
        assert row["container_digest"] == fact["container_digest"], row["task_id"]
        assert row["container_pinned_ref"] == fact["container_pinned_ref"], row["task_id"]
        assert row["evaluator_command"] == fact["evaluator_command"], row["task_id"]
        assert row["test_targets"] == fact["test_targets"], row["task_id"]
        assert row["overlays"] == [{"path": o["path"], "sha256": o["sha256"]} for o in fact["overlays"]], row["task_id"]
        assert row["dependency_ids"] == [d for d in fact["dependency_ids"] if d in facts_dependencies()], row["task_id"]
        assert row["dependency_count"] == len(row["dependency_ids"]), row["task_id"]


def test_specialist_ownership_equals_the_release_facts() -> None:
    expected = facts_tasks()
    for row in committed("tasks"):
        fact = expected[row["task_id"]]
        assert row["single_agent_writable_paths"] == fact["single_agent_writable_paths"], row["task_id"]
        ownership = {a["agent_id"]: (a["writable_paths"], a["primary_test_targets"]) for a in row["specialists"]}
        assert ownership == {
            a["agent_id"]: (a["writable_paths"], a["primary_test_targets"]) for a in fact["specialists"]
        }, row["task_id"]


def test_dependency_rows_are_exactly_the_52_point_set_with_their_facts() -> None:
    expected = facts_dependencies()
    rows = committed("dependencies")
    assert [r["dependency_id"] for r in rows] == list(expected)
    for row in rows:
        fact = expected[row["dependency_id"]]
        for field in ("task_id", "type_code", "dependency_type", "producer_agent", "consumer_agent",
                      "producer_subproblem", "consumer_subproblem", "upstream_probe_tests",
                      "downstream_probe_tests", "integrated_probe_tests", "metrics_enabled"):
            assert row[field] == fact[field], (row["dependency_id"], field)
        assert row["producer_files"] == (fact["producer_files"] or []), row["dependency_id"]
        assert row["consumer_files"] == (fact["consumer_files"] or []), row["dependency_id"]


def test_filesystem_spec_keeps_two_points_without_the_v0_3_2_addition() -> None:
    dropped = [d["dependency_id"] for d in facts()["dependencies"] if not d["in_52_point_set"]]
    assert dropped == ["filesystem_spec.backends_to_core.open_contract"]
    fsspec = [r for r in committed("dependencies") if r["task_id"] == "asyncodebench:filesystem_spec"]
    assert len(fsspec) == 2 and dropped[0] not in {r["dependency_id"] for r in fsspec}


def test_scenario_rows_match_the_upstream_protocol_scenarios() -> None:
    expected = facts_tasks()
    for row in committed("scenarios"):
        fact = expected[row["task_id"]]["protocol_scenarios"][row["protocol"]]
        assert row["source_scenario_id"] == fact["scenario_id"], row["scenario_id"]
        assert row["agent_count"] == fact["agent_count"], row["scenario_id"]
        if row["protocol"] != "async_manager":  # the facts record no online scenario of its own
            assert row["execution_mode"] == fact["execution_mode"], row["scenario_id"]
            assert row["communication_condition"] == fact["communication_condition"], row["scenario_id"]
            assert row["concurrent_execution"] == fact["concurrent_execution"], row["scenario_id"]


def test_no_row_reveals_a_reference_solution() -> None:
    gold = [t[GOLD_FIELD] for t in facts()["tasks"] if t.get(GOLD_FIELD)]
    assert len(gold) == 4  # the four TVM tasks: the check must have something to look for
    for config in FEATURES:
        raw = (ROOT / "data" / config / PARQUET_NAME).read_bytes()
        decoded = json.dumps(committed(config))
        for sha in gold:
            assert sha.encode() not in raw, (config, sha)
            assert sha[:7] not in decoded, (config, sha)  # not even abbreviated, e.g. in a prompt
    for published in ("README.md", "THIRD_PARTY_NOTICES.md"):
        text = (ROOT / published).read_text(encoding="utf-8")
        assert not any(sha[:7] in text for sha in gold), published


def test_first_task_is_cachetools_with_five_dependency_points() -> None:
    first = committed("tasks")[0]
    assert first["task_id"] == "asyncodebench:cachetools"
    assert first["dependency_count"] == 5


def test_scenario_ids_are_task_id_slash_protocol_five_per_task_in_protocol_order() -> None:
    rows = committed("scenarios")
    assert all(SCENARIO_ID.match(r["scenario_id"]) for r in rows)
    assert all(r["scenario_id"] == f"{r['task_id']}/{r['protocol']}" for r in rows)
    task_ids = [t["task_id"] for t in committed("tasks")]
    assert [r["scenario_id"] for r in rows] == [f"{t}/{p}" for t in task_ids for p in PROTOCOLS]


def notice_sections() -> dict[str, str]:
    """`### <task id>` sections of the committed notices, each with its text."""
    text = (ROOT / "THIRD_PARTY_NOTICES.md").read_text(encoding="utf-8")
    return {part.split("\n", 1)[0]: part for part in text.split("\n### ")[1:]}


def test_notices_name_each_task_revision_license_overlays_and_image_source() -> None:
    sections = notice_sections()
    rows = committed("tasks")
    assert list(sections) == [r["task_id"] for r in rows]
    for row in rows:
        section = sections[row["task_id"]]
        license_url = f"{row['repository_url']}/blob/{row['base_revision']}/{row['license_file']}"
        assert f"License: {row['license']} (SPDX)" in section and license_url in section, row["task_id"]
        assert all(f"`{o['path']}` (sha256 `{o['sha256']}`)" in section for o in row["overlays"]), row["task_id"]
        assert f"`{row['container_image']}`, digest `{row['container_digest']}`" in section, row["task_id"]
        publisher = ("Docker Hub by wentingzhao" if row["source_task_id"].startswith("commit0:")
                     else "GitHub Container Registry (GHCR) by kaituozhang")
        assert publisher in section, row["task_id"]


def test_notices_have_one_section_per_upstream_repository() -> None:
    text = (ROOT / "THIRD_PARTY_NOTICES.md").read_text(encoding="utf-8")
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    repositories = list(dict.fromkeys(r["repository_url"] for r in committed("tasks")))
    assert headings == [url.removeprefix("https://github.com/") for url in repositories]
    assert "apache/tvm" in headings and len(headings) == 16


def test_check_fails_when_the_notices_are_stale(tmp_path: Path) -> None:
    for rel in ["README.md", "THIRD_PARTY_NOTICES.md", *(f"data/{c}/{PARQUET_NAME}" for c in FEATURES)]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((ROOT / rel).read_bytes())
    notices = tmp_path / "THIRD_PARTY_NOTICES.md"
    notices.write_text(notices.read_text(encoding="utf-8").replace("License: MIT", "License: 0BSD", 1),
                       encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "AsynCodeBench.py", "--check", "--out-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 1
    assert "THIRD_PARTY_NOTICES.md" in done.stdout and PARQUET_NAME not in done.stdout


def test_the_kit_reads_a_local_folder_as_datasets_loads_it() -> None:
    """evaluate.py and the other scripts read a local dataset folder with pyarrow alone; the rows must be the ones
    `datasets.load_dataset` gives for the same Parquet files."""
    import datasets

    from asyncodebench.dataset.rows import CONFIGS, load_published

    assert CONFIGS == tuple(FEATURES)
    published = load_published(str(ROOT))
    for config in CONFIGS:
        files = {"test": str(ROOT / "data" / config / PARQUET_NAME)}
        assert getattr(published.rows, config) == datasets.load_dataset("parquet", data_files=files,
                                                                        split="test").to_list(), config


def test_a_run_and_the_help_of_evaluate_py_do_not_import_datasets() -> None:
    """`datasets` takes a second or more to import: only loading from the Hub and building the release need it."""
    check = ("import sys, runpy; sys.argv = ['evaluate.py', '--help']\n"
             "import asyncodebench.run.runner, asyncodebench.reports.report\n"
             "try:\n    runpy.run_path('scripts/evaluate.py', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print('datasets' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout
