"""A defect in the sources stops the build: exit 2, one message per problem naming file, row and field, and the
Parquet files already in the output folder untouched."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from asyncodebench.dataset.export import PARQUET_NAME
from asyncodebench.dataset.features import FEATURES

ROOT = Path(__file__).resolve().parent.parent
CACHETOOLS = "tasks/cachetools.yaml"
CACHETOOLS_ID = "asyncodebench:cachetools"
UNTYPED_KEY = "cachetools.keys_to_func.untyped_key_contract"
OUTPUT_FILES = [Path("data") / config / PARQUET_NAME for config in FEATURES] + [
    Path("README.md"), Path("THIRD_PARTY_NOTICES.md")
]


@dataclass(frozen=True)
class Defect:
    """One edit of a source file, and the problem the build must report for it."""

    file: str
    old: str
    new: str
    row: str
    field: str
    says: str


DEFECTS = {
    "missing_field": Defect(
        CACHETOOLS, "base_revision: a0a7e2b73f9e146b8a8f2912948b17a918e5fe83\n", "",
        CACHETOOLS_ID, "base_revision", "missing field"),
    "mistyped_field_name": Defect(
        CACHETOOLS, "\ntest_targets:\n", "\ntest_target:\n", CACHETOOLS_ID, "test_target",
        "rename it to 'test_targets'"),
    "unknown_protocol_in_assignments": Defect(
        "protocols.yaml", "assignments: caid_manager", "assignments: caid_managr",
        "async_manager", "assignments", "'caid_managr' is neither"),
    "duplicate_dependency_id": Defect(
        CACHETOOLS, "dependency_id: cachetools.keys_to_func.typed_key_contract", f"dependency_id: {UNTYPED_KEY}",
        UNTYPED_KEY, "dependency_id", "duplicate id"),
    "probe_outside_test_targets": Defect(
        CACHETOOLS, "  upstream_probe_tests:\n  - tests/test_keys.py::CacheKeysTest::test_hashkey\n",
        "  upstream_probe_tests:\n  - tests/test_hashkeys.py::CacheKeysTest::test_hashkey\n",
        UNTYPED_KEY, "upstream_probe_tests", "not in the task's test targets"),
    "unknown_producer_agent": Defect(
        CACHETOOLS, "producer_agent: key_agent", "producer_agent: keys_agent",
        UNTYPED_KEY, "producer_agent", "'keys_agent' is not a specialist"),
    "bad_digest": Defect(
        CACHETOOLS, "sha256:704f2e901689cc0693b02046a0577eb6c7e824edeb0ef032a0894bcecd9f3e8d",
        "sha256:704F2E901689cc0693b02046a0577eb6c7e824edeb0ef032a0894bcecd9f3e8d",
        CACHETOOLS_ID, "container_digest", "does not match"),
    "short_sha": Defect(
        CACHETOOLS, "base_revision: a0a7e2b73f9e146b8a8f2912948b17a918e5fe83", "base_revision: a0a7e2b",
        CACHETOOLS_ID, "base_revision", "'a0a7e2b' does not match"),
    "count_off_by_one": Defect(
        "release.yaml", "dependencies: 52", "dependencies: 53",
        "-", "expected_counts.dependencies", "declares 53 rows, the sources give 52"),
}


def copy_sources(tmp_path: Path) -> Path:
    """The release sources only: no demo, no Parquet (the build must not need them)."""
    data = tmp_path / "sources"
    shutil.copytree(ROOT / "data", data,
                    ignore=shutil.ignore_patterns("demo", "*.parquet", "dependencies", "scenarios"))
    return data


def seeded_output(tmp_path: Path) -> Path:
    """An output folder holding the committed files, as a checkout would."""
    out = tmp_path / "out"
    for rel in OUTPUT_FILES:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, out / rel)
    return out


def snapshot(folder: Path) -> dict[Path, tuple[bytes, int]]:
    return {rel: ((folder / rel).read_bytes(), (folder / rel).stat().st_mtime_ns) for rel in OUTPUT_FILES}


def break_source(data: Path, defect: Defect) -> Path:
    path = data / defect.file
    text = path.read_text(encoding="utf-8")
    assert text.count(defect.old) >= 1, f"the sources changed: {defect.old!r} no longer in {defect.file}"
    path.write_text(text.replace(defect.old, defect.new, 1), encoding="utf-8")
    return path


def run_build(data: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "AsynCodeBench.py", "--data-dir", str(data), "--out-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )


def problem_lines(stderr: str) -> list[str]:
    return [line.strip()[2:] for line in stderr.splitlines() if line.startswith("  - ")]


@pytest.mark.parametrize("name", list(DEFECTS))
def test_defect_fails_the_build_with_one_located_message_and_writes_nothing(name: str, tmp_path: Path) -> None:
    defect = DEFECTS[name]
    data, out = copy_sources(tmp_path), seeded_output(tmp_path)
    broken = break_source(data, defect)
    before, committed_before = snapshot(out), snapshot(ROOT)

    done = run_build(data, out)

    assert done.returncode == 2, done.stdout + done.stderr
    lines = problem_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{broken}: row {defect.row}: field {defect.field}: "), lines[0]
    assert defect.says in lines[0]
    assert "nothing was written" in done.stderr
    assert snapshot(out) == before
    assert snapshot(ROOT) == committed_before


def test_every_problem_is_reported_in_one_run(tmp_path: Path) -> None:
    data, out = copy_sources(tmp_path), seeded_output(tmp_path)
    for name in ("short_sha", "unknown_producer_agent", "count_off_by_one"):
        break_source(data, DEFECTS[name])

    done = run_build(data, out)

    assert done.returncode == 2
    fields = sorted(line.split(": ")[2] for line in problem_lines(done.stderr))
    assert fields == ["field base_revision", "field expected_counts.dependencies", "field producer_agent"]


def test_export_raises_source_error_and_leaves_the_output_folder_alone(tmp_path: Path) -> None:
    from asyncodebench.dataset.export import export
    from asyncodebench.dataset.problems import SourceError

    data, out = copy_sources(tmp_path), seeded_output(tmp_path)
    broken = break_source(data, DEFECTS["bad_digest"])
    before = snapshot(out)

    with pytest.raises(SourceError) as caught:
        export(type, data, out)  # never reaches the builder: validation comes first

    assert [(p.source, p.row, p.field) for p in caught.value.problems] == [
        (str(broken), CACHETOOLS_ID, "container_digest")]
    assert snapshot(out) == before
