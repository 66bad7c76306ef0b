"""Serve published dataset folders as a Hugging Face Hub on 127.0.0.1, so `load_dataset(..., revision=...)` runs
for real without the internet.

Each revision is a tagged commit of a git repository laid out as olah's local mirrors expect
(`<root>/datasets/<org>/<name>`); olah then answers the Hub API and file routes from it, offline. olah ignores byte
ranges, so the endpoint given out is a front that honours them (`range_front`): streaming reads work as on the Hub.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from asyncodebench.dataset.range_front import RangeProxy, serve_ranges

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "AsynCodeBench release", "GIT_AUTHOR_EMAIL": "release@asyncodebench.invalid",
    "GIT_COMMITTER_NAME": "AsynCodeBench release", "GIT_COMMITTER_EMAIL": "release@asyncodebench.invalid",
    "GIT_AUTHOR_DATE": "2026-11-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-11-01T00:00:00Z",
}


@dataclass(frozen=True)
class HubMirror:
    """A running mirror: point `HF_ENDPOINT` at `endpoint` (the Range-honouring front; `front.served` lists the
    ranged answers it gave); `olah_endpoint` is olah itself, which answers every range with the whole file."""

    endpoint: str
    repo_path: Path
    log_path: Path
    front: RangeProxy
    olah_endpoint: str


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit_revision(repo: Path, folder: Path, tag: str) -> str:
    """Make `folder`'s content the next commit of `repo`, tag it `tag`, and return the commit SHA."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        _git(repo, "init", "-q", "-b", "main")
    for entry in repo.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    shutil.copytree(folder, repo, dirs_exist_ok=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", f"Release {tag}")
    _git(repo, "tag", "-f", tag)
    return _git(repo, "rev-parse", "HEAD")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve(mirrors_root: Path, repo_id: str, port: int | None = None, timeout: float = 60) -> Iterator[HubMirror]:
    """Run olah on 127.0.0.1 over `mirrors_root`, offline, behind a front that honours byte ranges; stop both on
    exit."""
    port = port or _free_port()
    config = mirrors_root / "olah.toml"
    config.write_text(
        "[basic]\n"
        f'host = "127.0.0.1"\nport = {port}\n'
        f'repos-path = "{mirrors_root / "cache"}"\n'
        f'mirrors-path = ["{mirrors_root}"]\n'
        "[accessibility]\noffline = true\n",
        encoding="utf-8",
    )
    log_path = mirrors_root / "olah.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "olah.server", "--config", str(config)], cwd=mirrors_root, stdout=log, stderr=log
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(f"{endpoint}/api/datasets/{repo_id}/revision/main", process, log_path, timeout)
        with serve_ranges(endpoint) as front:
            yield HubMirror(front.endpoint, mirrors_root / "datasets" / repo_id, log_path, front, endpoint)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_until_up(url: str, process: subprocess.Popen, log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"olah exited with {process.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"olah did not answer {url} within {timeout:.0f} s; see {log_path}")
