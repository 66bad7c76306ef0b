"""`load_dataset(..., streaming=True)` through the Hub API gives the same rows as a normal load, for every config.

Streaming reads the Parquet files by byte ranges. olah ignores `Range`, so the kit's mirror (`hub_mirror.serve`)
puts a front before it that honours them (`dataset/range_front.py`), as the real Hub does, and the test counts the
ranged answers to prove that streaming really read the files in parts, for every configuration. Both loads run in
subprocesses because `datasets` and `huggingface_hub` read `HF_ENDPOINT` when they are imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asyncodebench.dataset import hub_mirror
from asyncodebench.dataset.export import PARQUET_NAME
from asyncodebench.dataset.features import FEATURES
from asyncodebench.dataset.publish import assemble
from asyncodebench.dataset.range_front import ServedRange
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION

pytestmark = pytest.mark.mirror
EXPECTED_ROWS = {"tasks": 19, "scenarios": 95, "dependencies": 52}

# argv: out_file repo_id revision streaming(0/1) config...
LOADER = """
import json, sys
from datasets import load_dataset

out_file, repo, revision, streaming, configs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5:]
rows = {c: list(load_dataset(repo, c, split="test", revision=revision, streaming=streaming)) for c in configs}
with open(out_file, "w") as f:
    json.dump(rows, f)
"""


def load_through(endpoint: str, streaming: bool, work: Path) -> dict[str, list[dict[str, Any]]]:
    """Rows of every config loaded from the Hub at `endpoint`, in a fresh interpreter with an empty cache."""
    name = "streamed" if streaming else "loaded"
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(work / f"hf_home_{name}")}
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HF_TOKEN", None)
    out_file = work / f"{name}.json"
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(out_file), DEFAULT_DATASET, DEFAULT_REVISION, "1" if streaming else "0",
         *FEATURES],
        cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out_file.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The release streamed and loaded normally through the kit's mirror, plus the ranged answers of the stream."""
    work = tmp_path_factory.mktemp("streaming")
    assemble(work / "release")
    commit = hub_mirror.commit_revision(work / "mirrors" / "datasets" / DEFAULT_DATASET, work / "release",
                                        DEFAULT_REVISION)
    with hub_mirror.serve(work / "mirrors", DEFAULT_DATASET) as mirror:
        streamed = load_through(mirror.endpoint, streaming=True, work=work)
        served = list(mirror.front.served)
        loaded = load_through(mirror.endpoint, streaming=False, work=work)
        yield {"streamed": streamed, "loaded": loaded, "served": served, "commit": commit, "front": mirror.front,
               "sizes": {c: (work / "release" / "data" / c / PARQUET_NAME).stat().st_size for c in FEATURES}}


def served_for(hub: dict[str, Any], config: str) -> list[ServedRange]:
    path = f"/datasets/{DEFAULT_DATASET}/resolve/{hub['commit']}/data/{config}/{PARQUET_NAME}"
    return [s for s in hub["served"] if s.path == path]


def test_streaming_gives_the_rows_of_a_normal_load_for_every_config(hub: dict[str, Any]) -> None:
    assert {c: len(rows) for c, rows in hub["streamed"].items()} == EXPECTED_ROWS
    for config in FEATURES:
        assert hub["streamed"][config] == hub["loaded"][config], config


def test_streaming_read_every_parquet_file_through_range_requests(hub: dict[str, Any]) -> None:
    assert hub["served"], "the stream asked for no byte range: it did not read the files the streaming way"
    for config in FEATURES:
        ranges = served_for(hub, config)
        assert ranges, f"no ranged read of the {config} Parquet file at the release commit"
        assert all(r.size == hub["sizes"][config] for r in ranges), config
    # the largest file is read in parts (footer first), not in one request
    tasks = served_for(hub, "tasks")
    assert any(r.last - r.first + 1 < r.size for r in tasks), tasks


def test_front_answers_byte_ranges_with_partial_content(hub: dict[str, Any]) -> None:
    front, size = hub["front"], hub["sizes"]["tasks"]
    url = f"{front.endpoint}/datasets/{DEFAULT_DATASET}/resolve/{DEFAULT_REVISION}/data/tasks/{PARQUET_NAME}"
    before = len(front.served)
    for wanted, content_range in (("bytes=0-3", f"bytes 0-3/{size}"),
                                  ("bytes=-4", f"bytes {size - 4}-{size - 1}/{size}")):
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Range": wanted}), timeout=30) as answer:
            assert answer.status == 206
            assert answer.headers["Content-Range"] == content_range
            assert answer.read() == b"PAR1"  # Parquet files start and end with this magic
    assert len(front.served) == before + 2
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, headers={"Range": f"bytes={size}-"}), timeout=30)
    assert refused.value.code == 416
