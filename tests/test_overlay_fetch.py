"""Overlays fetched at run time (no Docker): from a real HTTP server on 127.0.0.1 standing in for the upstream
repository, verified by sha256, cached by sha256, and every failure one clear message that becomes an infrastructure
error of the task's predictions, never a score."""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest
import yaml
from helpers.checkout import DEMO_DIR, PROTOCOLS_FILE, ROOT, SCRIPTS, script_env
from helpers.dataset_folders import write_variant_dataset
from helpers.demo_overlay import OVERLAY, OVERLAY_PATH  # one extra test file

from asyncodebench.dataset.build import build_task_rows
from asyncodebench.harness.overlays import (
    UPSTREAM_COMMIT,
    UPSTREAM_REPOSITORY,
    URL_VARIABLE,
    OverlayError,
    OverlaySource,
)
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.images.digests import MATCH, ImageStatus
from asyncodebench.run import runner
from asyncodebench.run.config import RunConfig
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.work import Job, evaluate_prediction

OVERLAY_SHA256 = hashlib.sha256(OVERLAY).hexdigest()
ALTERED_PATH = "data/overlays/demo/0002-altered.patch"  # served, but not the bytes its pin names
MISSING_PATH = "data/overlays/demo/0003-not-published.patch"


class Upstream:
    """A stand-in for raw.githubusercontent.com: serves `<root>/<commit>/<path>`, counts the requests."""

    def __init__(self, root: Path) -> None:
        self.hits: list[str] = []
        upstream = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                upstream.hits.append(self.path)
                super().do_GET()

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest's output clean
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      functools.partial(Handler, directory=str(root)))
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/{UPSTREAM_COMMIT}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    tree = tmp_path / "upstream" / UPSTREAM_COMMIT
    (tree / OVERLAY_PATH).parent.mkdir(parents=True)
    (tree / OVERLAY_PATH).write_bytes(OVERLAY)
    (tree / ALTERED_PATH).write_bytes(OVERLAY.replace(b"assert True", b"assert 1"))
    server = Upstream(tmp_path / "upstream")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own cache and no inherited URL override or proxy (127.0.0.1 is reached directly)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))
    monkeypatch.delenv(URL_VARIABLE, raising=False)
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache-home" / "asyncodebench" / "overlays"


def demo_spec(*overlays: tuple[str, str]) -> TaskSpec:
    """The demo task as the harness sees it, with the given overlays in its row."""
    rows = build_task_rows(DEMO_DIR / "task.yaml", PROTOCOLS_FILE)
    return replace(TaskSpec.from_rows(rows.tasks[0], rows.dependencies), overlays=tuple(overlays))


def config(tmp_path: Path, **overlay_options: Any) -> RunConfig:
    return RunConfig(predictions=tmp_path / "preds.jsonl", dataset=str(tmp_path / "dataset"), revision=None,
                     run_id="overlay-fetch", output_dir=tmp_path / "runs", **overlay_options)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_fetched_overlay_is_verified_and_cached_then_read_from_the_cache_with_the_server_gone(
    upstream: Upstream, isolated_cache: Path, tmp_path: Path
) -> None:
    spec = demo_spec((OVERLAY_PATH, OVERLAY_SHA256))
    cfg = config(tmp_path, overlays_url=upstream.base_url)
    assert runner.load_overlays(cfg, spec) == {OVERLAY_PATH: OVERLAY}
    assert upstream.hits == [f"/{UPSTREAM_COMMIT}/{OVERLAY_PATH}"]
    assert (isolated_cache / f"{OVERLAY_SHA256}.patch").read_bytes() == OVERLAY

    upstream.stop()  # the second call must not need the network
    assert runner.load_overlays(cfg, spec) == {OVERLAY_PATH: OVERLAY}
    assert len(upstream.hits) == 1


def test_a_wrong_digest_is_refused_and_not_cached(upstream: Upstream, isolated_cache: Path, tmp_path: Path) -> None:
    spec = demo_spec((ALTERED_PATH, OVERLAY_SHA256))  # the server's file is not the pinned one
    message = runner.load_overlays(config(tmp_path, overlays_url=upstream.base_url), spec)
    assert isinstance(message, str) and "\n" not in message
    altered = hashlib.sha256(OVERLAY.replace(b"assert True", b"assert 1")).hexdigest()
    assert f"has sha256 {altered}, the row pins {OVERLAY_SHA256}" in message
    assert "--overlays-url" in message and "--overlays-dir" in message
    assert not isolated_cache.exists() or not any(isolated_cache.iterdir())


def test_a_file_missing_upstream_is_a_404_message(upstream: Upstream, tmp_path: Path) -> None:
    spec = demo_spec((MISSING_PATH, OVERLAY_SHA256))
    message = runner.load_overlays(config(tmp_path, overlays_url=upstream.base_url), spec)
    assert isinstance(message, str) and "\n" not in message
    assert message.startswith(f"{spec.task_id}: overlay {MISSING_PATH} is not at ")
    assert "HTTP 404" in message and UPSTREAM_COMMIT in message and "--overlays-dir" in message


def test_an_unreachable_server_fails_fast_with_what_to_do(tmp_path: Path) -> None:
    spec = demo_spec((OVERLAY_PATH, OVERLAY_SHA256))
    port = closed_port()
    started = time.monotonic()
    message = runner.load_overlays(config(tmp_path, overlays_url=f"http://127.0.0.1:{port}/x"), spec)
    assert time.monotonic() - started < 10
    assert isinstance(message, str) and "\n" not in message and "Traceback" not in message
    assert f"cannot reach 127.0.0.1:{port}" in message
    assert "check the network" in message and "--overlays-dir" in message


def test_a_slow_server_hits_the_timeout(tmp_path: Path) -> None:
    """A server that accepts the connection and never answers ends at the timeout, not in a hang."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        source = OverlaySource(url=f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(OverlayError, match="cannot reach .*timeout 0.5 s"):
            source.load([(OVERLAY_PATH, OVERLAY_SHA256)])
        assert time.monotonic() - started < 5


def test_a_damaged_cache_entry_is_dropped_and_fetched_again(
    upstream: Upstream, isolated_cache: Path, tmp_path: Path
) -> None:
    isolated_cache.mkdir(parents=True)
    (isolated_cache / f"{OVERLAY_SHA256}.patch").write_bytes(b"not the overlay")
    source = OverlaySource(url=upstream.base_url)
    assert source.load([(OVERLAY_PATH, OVERLAY_SHA256)]) == {OVERLAY_PATH: OVERLAY}
    assert len(upstream.hits) == 1
    assert (isolated_cache / f"{OVERLAY_SHA256}.patch").read_bytes() == OVERLAY


def test_the_environment_variable_sets_the_base_url(
    upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_VARIABLE, upstream.base_url + "/")
    cfg = config(tmp_path)
    assert runner.load_overlays(cfg, demo_spec((OVERLAY_PATH, OVERLAY_SHA256))) == {OVERLAY_PATH: OVERLAY}
    assert cfg.overlay_source.describe()["url"] == upstream.base_url


def test_overlays_dir_still_works_offline_and_wins_over_the_url(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / OVERLAY_PATH).parent.mkdir(parents=True)
    (checkout / OVERLAY_PATH).write_bytes(OVERLAY)
    dead_url = f"http://127.0.0.1:{closed_port()}/x"
    spec = demo_spec((OVERLAY_PATH, OVERLAY_SHA256))
    assert runner.load_overlays(config(tmp_path, overlays_dir=checkout, overlays_url=dead_url), spec) == {
        OVERLAY_PATH: OVERLAY}
    message = runner.load_overlays(config(tmp_path, overlays_dir=tmp_path / "empty"), spec)
    assert isinstance(message, str) and "is not readable under" in message


def test_damaged_pins_are_refused_before_any_request(upstream: Upstream) -> None:
    source = OverlaySource(url=upstream.base_url)
    with pytest.raises(OverlayError, match="not a relative path"):
        source.load([("../../etc/passwd", OVERLAY_SHA256)])
    with pytest.raises(OverlayError, match="not a sha256"):
        source.load([(OVERLAY_PATH, "../../x")])
    assert upstream.hits == []


def test_a_task_without_overlays_needs_nothing(tmp_path: Path) -> None:
    assert runner.load_overlays(config(tmp_path, overlays_url=f"http://127.0.0.1:{closed_port()}"),
                                 demo_spec()) == {}


def test_an_overlay_failure_becomes_an_infrastructure_error_of_the_prediction(tmp_path: Path) -> None:
    """The message becomes the prediction's `overlay_missing` outcome and nothing starts: no score, no container
    (no Docker client is even given)."""
    spec = demo_spec((MISSING_PATH, OVERLAY_SHA256))
    cfg = config(tmp_path, overlays_url=f"http://127.0.0.1:{closed_port()}")
    message = runner.load_overlays(cfg, spec)
    image = ImageStatus(spec.task_id, spec.pinned_ref, MATCH)
    prediction = Prediction(1, spec.task_id, "single", "m", None, "", (), {}, {})
    outcome = evaluate_prediction(None, Job(spec, prediction, cfg.settings, message, None, cfg.label), image)
    assert outcome is not None and outcome.evidence is None
    assert outcome.result.status == "infrastructure_error"
    assert outcome.result.to_json()["infrastructure_error"] == {"kind": "overlay_missing", "message": message}


def test_the_source_commit_is_recorded_in_the_release_and_the_report_schema() -> None:
    release = yaml.safe_load((ROOT / "data" / "release.yaml").read_text())
    assert release["overlays_source"] == {"repository": UPSTREAM_REPOSITORY, "commit": UPSTREAM_COMMIT}
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    overlays_schema = schema["properties"]["run"]["properties"]["overlays"]
    for source in (OverlaySource(), OverlaySource(directory=Path("/checkout"))):
        jsonschema.validate(source.describe(), overlays_schema)
    assert OverlaySource().describe()["url"].endswith(f"/{UPSTREAM_COMMIT}")


def test_evaluate_py_takes_the_overlays_url_flag(tmp_path: Path) -> None:
    loaded = importlib.util.spec_from_file_location("evaluate_script", SCRIPTS / "evaluate.py")
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    preds = tmp_path / "preds.jsonl"
    preds.write_text("")
    cfg = module.parse_args([str(preds), "--overlays-url", "http://127.0.0.1:9/base"])
    assert cfg.overlays_url == "http://127.0.0.1:9/base" and cfg.overlays_dir is None


def test_run_task_py_reports_an_overlay_it_cannot_fetch_as_an_infrastructure_error(
    upstream: Upstream, tmp_path: Path
) -> None:
    """Before any container: exit 3 and the one-line reason (a 404 here)."""
    digest = yaml.safe_load((DEMO_DIR / "task.yaml").read_text())["container_digest"]
    dataset = write_variant_dataset(tmp_path / "dataset", digest,
                                    [{"overlays": [{"path": MISSING_PATH, "sha256": OVERLAY_SHA256}]}])
    done = subprocess.run([sys.executable, str(SCRIPTS / "run_task.py"), "asyncodebench-demo:minicache", "--base",
                           "--dataset", str(dataset), "--overlays-url", upstream.base_url],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=script_env({"XDG_CACHE_HOME": str(tmp_path / "cache-home")}))
    assert done.returncode == 3, done.stderr
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]  # beside progress bars
    assert error.startswith(f"error: overlay {MISSING_PATH} is not at ") and "HTTP 404" in error
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "127.0.0.1/x", "http://[::1/x"])
def test_a_base_url_that_is_not_http_is_refused_with_a_message(url: str) -> None:
    with pytest.raises(OverlayError, match="is not an http\\(s\\) URL: set --overlays-url"):
        OverlaySource(url=url).load([(OVERLAY_PATH, OVERLAY_SHA256)])
