"""The three ways users get the rows (the Hub with a pinned revision, a local checkout, the builder) work and agree.

The Hub is real: olah serves a git repository holding the assembled Hub folder, tagged like the release. Loading runs
in a subprocess because `datasets` and `huggingface_hub` read `HF_ENDPOINT` when they are imported.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from AsynCodeBench import AsynCodeBench
from asyncodebench.dataset import hub_mirror
from asyncodebench.dataset.export import PARQUET_NAME, split_front_matter, write_front_matter
from asyncodebench.dataset.features import FEATURES
from asyncodebench.dataset.publish import assemble
from asyncodebench.dataset.rows import DEFAULT_DATASET

ROOT = Path(__file__).resolve().parent.parent
EXPECTED_ROWS = {"tasks": 19, "scenarios": 95, "dependencies": 52}
RELEASE_TAG, OTHER_TAG = "v0.4.2", "v0.4.1-test"

# argv: out_file repo_id config,config,... revision...
HUB_LOADER = """
import json, sys
from datasets import load_dataset
from asyncodebench.dataset.rows import load_published

out_file, repo, configs, revisions = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4:]
result = {}
for revision in revisions:
    published = load_published(repo, revision)
    loaded = {c: load_dataset(repo, c, split="test", revision=revision) for c in configs}
    result[revision] = {
        "rows": {c: ds.to_list() for c, ds in loaded.items()},
        "sizes": {c: {"num_bytes": ds.info.splits["test"].num_bytes,
                      "num_examples": ds.info.splits["test"].num_examples,
                      "dataset_size": ds.info.dataset_size, "download_size": ds.info.download_size}
                  for c, ds in loaded.items()},
        "published_rows": {c: len(rows) for c, rows in published.rows.by_config().items()},
        "resolved_commit": published.resolved_commit,
    }
with open(out_file, "w") as f:
    json.dump(result, f)
"""


def run_python(code: str, out_file: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    """Run `code` in a fresh interpreter that writes JSON to `out_file` (its first argument); return that JSON."""
    done = subprocess.run(
        [sys.executable, "-c", code, str(out_file), *args], cwd=cwd, env=env or os.environ.copy(),
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out_file.read_text(encoding="utf-8"))


def builder_rows(cache_dir: Path) -> dict[str, list[dict[str, Any]]]:
    rows = {}
    for config in FEATURES:
        builder = AsynCodeBench(config_name=config, cache_dir=str(cache_dir))
        builder.download_and_prepare()
        rows[config] = builder.as_dataset(split="test").to_list()
    return rows


def one_row_fewer(hub_folder: Path) -> None:
    """Turn an assembled Hub folder into a different, still consistent revision: the last task row removed."""
    parquet = hub_folder / "data" / "tasks" / PARQUET_NAME
    table = pq.read_table(parquet)
    pq.write_table(table.slice(0, table.num_rows - 1), parquet)
    meta, _ = split_front_matter((hub_folder / "README.md").read_text(encoding="utf-8"))
    info = meta["dataset_info"]
    tasks_info = next(i for i in info if i["config_name"] == "tasks")
    tasks_info["splits"][0]["num_examples"] = table.num_rows - 1
    write_front_matter(hub_folder / "README.md", {"dataset_info": info})


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Both tagged revisions loaded through the mirror, plus the commit each tag points at."""
    work = tmp_path_factory.mktemp("hub")
    repo = work / "mirrors" / "datasets" / DEFAULT_DATASET
    assemble(work / "release")
    commits = {RELEASE_TAG: hub_mirror.commit_revision(repo, work / "release", RELEASE_TAG)}
    assemble(work / "other")
    one_row_fewer(work / "other")
    commits[OTHER_TAG] = hub_mirror.commit_revision(repo, work / "other", OTHER_TAG)
    (work / "hf_home").mkdir()
    with hub_mirror.serve(work / "mirrors", DEFAULT_DATASET) as mirror, pytest.MonkeyPatch.context() as env:
        env.setenv("HF_ENDPOINT", mirror.endpoint)
        env.setenv("HF_HOME", str(work / "hf_home"))
        env.delenv("HF_HUB_OFFLINE", raising=False)
        env.delenv("HF_TOKEN", raising=False)
        loaded = run_python(HUB_LOADER, work / "loaded.json", DEFAULT_DATASET, ",".join(FEATURES), RELEASE_TAG,
                            OTHER_TAG, cwd=work)
    yield {"loaded": loaded, "commits": commits}


@pytest.fixture(scope="module")
def from_builder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    return builder_rows(tmp_path_factory.mktemp("builder-cache"))


def local_recipe() -> str:
    """The Python block of the loading page's "From a local checkout" section, exactly as users copy it."""
    page = (ROOT / "docs" / "loading.md").read_text(encoding="utf-8")
    section = page.split("\n## From a local checkout", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def checkout_copy(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for entry in ("AsynCodeBench.py", "README.md", "LICENSE", "CITATION.cff", "THIRD_PARTY_NOTICES.md"):
        shutil.copy2(ROOT / entry, folder / entry)
    shutil.copytree(ROOT / "data", folder / "data")
    return folder


def run_local_recipe(folder: Path, tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    code = local_recipe().replace('Path("path/to/checkout")', f"Path({str(folder)!r})")
    code += "\nimport json, sys\njson.dump({c: ds.to_list() for c, ds in release.items()}, open(sys.argv[1], 'w'))\n"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home")}
    return run_python(code, tmp_path / "local.json", cwd=folder, env=env)


@pytest.mark.mirror
def test_hub_release_tag_gives_the_release_counts_for_every_config(hub: dict[str, Any]) -> None:
    rows = hub["loaded"][RELEASE_TAG]["rows"]
    assert {config: len(rows[config]) for config in FEATURES} == EXPECTED_ROWS


@pytest.mark.mirror
def test_hub_other_tag_gives_that_revision_content_not_the_release(hub: dict[str, Any]) -> None:
    release, other = hub["loaded"][RELEASE_TAG]["rows"], hub["loaded"][OTHER_TAG]["rows"]
    assert len(other["tasks"]) == 18
    assert other["tasks"] == release["tasks"][:18]
    assert other["scenarios"] == release["scenarios"]


@pytest.mark.mirror
def test_card_sizes_equal_what_datasets_reports_after_loading_each_config_from_the_hub(hub: dict[str, Any]) -> None:
    """`dataset_info` in the card: Arrow bytes in memory (`num_bytes`, `dataset_size`) and Parquet bytes on disk
    (`download_size`), as `datasets` itself records them once a config is loaded from the Hub."""
    meta, _ = split_front_matter((ROOT / "README.md").read_text(encoding="utf-8"))
    card = {info["config_name"]: info for info in meta["dataset_info"]}
    for config, loaded in hub["loaded"][RELEASE_TAG]["sizes"].items():
        split = card[config]["splits"][0]
        assert split["num_bytes"] == loaded["num_bytes"], config
        assert split["num_examples"] == loaded["num_examples"], config
        assert card[config]["dataset_size"] == loaded["dataset_size"], config
        assert card[config]["download_size"] == loaded["download_size"], config
        assert card[config]["download_size"] == (ROOT / "data" / config / PARQUET_NAME).stat().st_size, config


@pytest.mark.mirror
def test_load_published_resolves_each_tag_to_its_commit(hub: dict[str, Any]) -> None:
    for tag, commit in hub["commits"].items():
        assert hub["loaded"][tag]["resolved_commit"] == commit
    assert hub["loaded"][RELEASE_TAG]["published_rows"] == EXPECTED_ROWS
    assert hub["commits"][RELEASE_TAG] != hub["commits"][OTHER_TAG]


@pytest.mark.parametrize("folder_name", ["AsynCodeBench", "asyncodebench-checkout"])
def test_documented_local_recipe_works_whatever_the_checkout_folder_is_called(folder_name: str, tmp_path: Path) -> None:
    rows = run_local_recipe(checkout_copy(tmp_path, folder_name), tmp_path)
    assert {config: len(rows[config]) for config in FEATURES} == EXPECTED_ROWS


def test_loading_a_checkout_named_asyncodebench_as_a_dataset_folder_hits_the_documented_trap(tmp_path: Path) -> None:
    folder = checkout_copy(tmp_path, "AsynCodeBench")
    code = (
        "import sys\nfrom datasets import load_dataset\n"
        f"try:\n    load_dataset({str(folder)!r}, 'tasks', split='test')\n"
        "except RuntimeError as exc:\n    open(sys.argv[1], 'w').write(__import__('json').dumps(str(exc)))\n"
    )
    message = run_python(code, tmp_path / "error.json", cwd=tmp_path,
                         env={**os.environ, "HF_HOME": str(tmp_path / "hf")})
    assert "Dataset scripts are no longer supported" in message
    for documented in ("README.md", "docs/loading.md"):  # the card warns in a line, the loading page explains
        assert "Dataset scripts are no longer supported" in (ROOT / documented).read_text(encoding="utf-8")


def test_pandas_reads_the_committed_files_with_the_release_counts_and_ids(
    from_builder: dict[str, list[dict[str, Any]]],
) -> None:
    for config, expected in EXPECTED_ROWS.items():
        frame = pd.read_parquet(ROOT / "data" / config / PARQUET_NAME)
        assert len(frame) == expected
        id_field = next(iter(FEATURES[config]))
        assert frame[id_field].tolist() == [row[id_field] for row in from_builder[config]]


@pytest.mark.mirror
def test_hub_local_checkout_and_builder_give_identical_rows(
    hub: dict[str, Any], from_builder: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    local = run_local_recipe(checkout_copy(tmp_path, "AsynCodeBench"), tmp_path)
    from_hub = hub["loaded"][RELEASE_TAG]["rows"]
    for config in FEATURES:
        # through JSON, as the Hub and local rows came, so the comparison is value for value
        assert from_hub[config] == local[config] == json.loads(json.dumps(from_builder[config])), config
