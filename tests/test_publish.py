"""The Hub folder holds exactly the published files, and the publish script never uploads without being asked."""

from __future__ import annotations

import http.server
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from helpers.checkout import script_env

from asyncodebench.dataset.publish import assemble, linked_docs

ROOT = Path(__file__).resolve().parent.parent
HUB_FILES = {
    "README.md", "eval.yaml", "LICENSE", "THIRD_PARTY_NOTICES.md", "CITATION.cff",
    "data/tasks/test-00000-of-00001.parquet",
    "data/scenarios/test-00000-of-00001.parquet",
    "data/dependencies/test-00000-of-00001.parquet",
    # the pictures the card shows, so they are not broken on the Hub
    "docs/screenshots/report-demo.png", "docs/screenshots/report-demo-390.png",
    "docs/screenshots/report-synthetic-timelines.png",
    "docs/screenshots/compare-synthetic.png", "docs/screenshots/timeline-synthetic.png",
    "docs/screenshots/timeline-synthetic-390.png", "docs/screenshots/timeline-caid-manager.png",
    # the kit's pages the card links to (or pages those link to), so its links (and the comparison page's notes)
    # open on the Hub
    "docs/METRICS.md", "docs/probe_attribution.md", "docs/fields.md", "docs/loading.md", "docs/dataset_creation.md",
    "docs/quickstart.md", "docs/evaluate.md", "docs/ray.md", "docs/pages.md", "docs/integrity.md", "docs/images.md",
    "docs/benchmarks.md", "docs/agents.md", "docs/architecture.md", "docs/architecture.svg",
}


class RecordingHub(http.server.BaseHTTPRequestHandler):
    """Answers every request with 500 and remembers it, so any attempt to reach the Hub is seen."""

    requests: ClassVar[list[str]] = []

    def _record(self) -> None:
        RecordingHub.requests.append(f"{self.command} {self.path}")
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST = do_PUT = do_HEAD = _record

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hub_endpoint() -> Iterator[str]:
    RecordingHub.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run_publish(out_dir: Path, *flags: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/publish.py", str(out_dir), *flags], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_assemble_copies_exactly_the_card_eval_yaml_parquet_license_citation_and_pictures(tmp_path: Path) -> None:
    listed = assemble(tmp_path / "hub")
    assert files_under(tmp_path / "hub") == HUB_FILES
    assert {f.path for f in listed} == HUB_FILES
    for rel in HUB_FILES:
        assert (tmp_path / "hub" / rel).read_bytes() == (ROOT / rel).read_bytes(), rel


def test_pages_linked_through_pages_go_with_their_pictures_and_nothing_outside_docs(tmp_path: Path) -> None:
    (tmp_path / "docs" / "img").mkdir(parents=True)
    (tmp_path / "README.md").write_text("[a](docs/a.md#top) [web](https://example.org/docs/w.md) [here](#contact)\n"
                                        "```\n[shown as typed](docs/code.md)\n```\n", encoding="utf-8")
    (tmp_path / "docs" / "a.md").write_text("[b](b.md#x) ![p](img/p.png) [kit](../scripts/x.py) [card](../README.md)",
                                            encoding="utf-8")
    (tmp_path / "docs" / "b.md").write_text("[back](a.md) [outside](../../elsewhere.md) `[code](c.md)`",
                                            encoding="utf-8")
    assert linked_docs(tmp_path) == [Path("docs/a.md"), Path("docs/b.md"), Path("docs/img/p.png")]


def test_assembled_folder_carries_no_builder_and_no_sources(tmp_path: Path) -> None:
    assemble(tmp_path / "hub")
    present = files_under(tmp_path / "hub")
    assert not [p for p in present if p.endswith(".py")]
    assert not [p for p in present if p.endswith((".yaml", ".md")) and p.startswith("data/")]


def test_assemble_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(FileExistsError, match="not empty"):
        assemble(tmp_path / "hub")
    assert files_under(tmp_path / "hub") == {"notes.txt"}


def test_assemble_names_the_missing_file_and_how_to_make_it(tmp_path: Path) -> None:
    root = tmp_path / "kit"
    for rel in HUB_FILES - {"THIRD_PARTY_NOTICES.md"}:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, root / rel)
    with pytest.raises(FileNotFoundError, match=r"THIRD_PARTY_NOTICES\.md.*python AsynCodeBench\.py"):
        assemble(tmp_path / "hub", root=root)


def test_dry_run_lists_every_file_and_contacts_no_hub(tmp_path: Path, hub_endpoint: str) -> None:
    env = {**script_env(), "HF_ENDPOINT": hub_endpoint, "HF_TOKEN": "hf_not_a_real_token",
           "HF_HOME": str(tmp_path / "hf")}
    done = run_publish(tmp_path / "hub", "--dry-run", env=env)
    assert done.returncode == 0, done.stderr
    listed = {line.split()[-1] for line in done.stdout.splitlines() if line.split() and line.split()[-1] in HUB_FILES}
    assert listed == HUB_FILES
    assert "dry run" in done.stdout
    assert RecordingHub.requests == []


def test_without_token_and_without_dry_run_it_exits_2_and_says_what_to_set(tmp_path: Path, hub_endpoint: str) -> None:
    env = {k: v for k, v in script_env().items() if k != "HF_TOKEN"}
    env.update(HF_ENDPOINT=hub_endpoint, HF_HOME=str(tmp_path / "hf"))
    done = run_publish(tmp_path / "hub", env=env)
    assert done.returncode == 2
    assert "HF_TOKEN" in done.stderr and "--dry-run" in done.stderr
    assert RecordingHub.requests == []


def test_the_token_hf_auth_login_saved_is_found_and_a_refusing_hub_exits_3(tmp_path: Path, hub_endpoint: str) -> None:
    """No HF_TOKEN, only the token file `hf auth login` writes: the upload is tried against the local server, which
    answers 500 to everything, and the script says so in one message (exit 3) instead of a traceback."""
    env = {k: v for k, v in script_env().items() if k != "HF_TOKEN"}
    env.update(HF_ENDPOINT=hub_endpoint, HF_HOME=str(tmp_path / "hf"))
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "token").write_text("hf_not_a_real_token", encoding="utf-8")
    done = run_publish(tmp_path / "hub", env=env)
    assert done.returncode == 3, done.stderr
    assert RecordingHub.requests, "the upload was not tried: the saved token was not found"
    assert hub_endpoint in done.stderr and "Traceback" not in done.stderr


def test_the_dataset_and_revision_flags_and_their_old_names_name_the_upload(tmp_path: Path, hub_endpoint: str) -> None:
    env = {**script_env(), "HF_ENDPOINT": hub_endpoint, "HF_HOME": str(tmp_path / "hf")}
    done = run_publish(tmp_path / "new", "--dry-run", "--dataset", "my-org/Bench", "--revision", "v9.9", env=env)
    assert done.returncode == 0, done.stderr
    assert "to datasets/my-org/Bench and tag v9.9" in done.stdout and "warning" not in done.stderr
    old = run_publish(tmp_path / "old", "--dry-run", "--repo-id", "my-org/Bench", "--tag", "v9.9", env=env)
    assert old.returncode == 0, old.stderr
    assert "to datasets/my-org/Bench and tag v9.9" in old.stdout
    assert "--repo-id is deprecated" in old.stderr and "--tag is deprecated" in old.stderr
    assert RecordingHub.requests == []
