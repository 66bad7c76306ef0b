"""The overlay patches of a task, each checked against the sha256 its row pins before anything uses it.

Overlays are test and bootstrap patches published in the upstream AsynCodeBench repository; the rows name them by
path and sha256 only. They come from one of two places:

- a local checkout of that repository (`--overlays-dir`), for machines without network access;
- otherwise the repository itself over HTTPS, at the commit this release pins (`UPSTREAM_COMMIT`, also recorded as
  `overlays_source` in data/release.yaml). The base URL can be pointed elsewhere (`--overlays-url`, or the
  environment variable `ASYNCODEBENCH_OVERLAYS_URL`), for a mirror or a test server.

Fetched files are kept in a cache on disk named by their sha256 (`$XDG_CACHE_HOME/asyncodebench/overlays/`, by
default `~/.cache/asyncodebench/overlays/`), so a second run needs no network. A cached file is checked again each
time it is read; one that no longer matches is dropped and fetched anew.

Whatever goes wrong ends as one `OverlayError` whose message says which overlay, what happened and what to do; the
runner turns it into an infrastructure error of the task's predictions, never a score.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

from asyncodebench.files import write_atomic

UPSTREAM_REPOSITORY = "https://github.com/KaituoZhang/AsynCodeBench"
UPSTREAM_COMMIT = "566c32b6f4ad209ecfe95f10970b02d4b79289c1"  # the upstream v0.4.1 task index
DEFAULT_BASE_URL = f"https://raw.githubusercontent.com/KaituoZhang/AsynCodeBench/{UPSTREAM_COMMIT}"
URL_VARIABLE = "ASYNCODEBENCH_OVERLAYS_URL"
TIMEOUT_SECONDS = 15.0  # per connection attempt and per read; the overlays are a few kilobytes
MAX_BYTES = 16 * 1024 * 1024  # far above any overlay; a server sending more is not serving one
_SHA256 = re.compile(r"[0-9a-f]{64}")
_OFFLINE_HINT = (f"or pass --overlays-dir with a checkout of {UPSTREAM_REPOSITORY} at commit {UPSTREAM_COMMIT}")


class OverlayError(Exception):
    """An overlay could not be had or is not the pinned file; the message says which and what to do."""


def default_cache_dir() -> Path:
    """Where fetched overlays are kept: `$XDG_CACHE_HOME/asyncodebench/overlays`, else under `~/.cache`."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "asyncodebench" / "overlays"


@dataclass(frozen=True)
class OverlaySource:
    """Where a run takes overlays from: a checkout when `directory` is set, else `base_url` plus the cache."""

    directory: Path | None = None
    url: str | None = None  # the --overlays-url flag; None: $ASYNCODEBENCH_OVERLAYS_URL, else DEFAULT_BASE_URL
    cache: Path | None = None  # None: default_cache_dir()
    timeout: float = TIMEOUT_SECONDS

    @property
    def base_url(self) -> str:
        """Where overlays are fetched from: `url`, else `$ASYNCODEBENCH_OVERLAYS_URL`, else `DEFAULT_BASE_URL`."""
        return (self.url or os.environ.get(URL_VARIABLE) or DEFAULT_BASE_URL).rstrip("/")

    @property
    def cache_dir(self) -> Path:
        """Where fetched overlays are kept: `cache`, else `default_cache_dir()`."""
        return self.cache if self.cache is not None else default_cache_dir()

    def describe(self) -> dict[str, Any]:
        """The run report's record of it: the pinned upstream repository and commit, and what was actually read."""
        return {
            "repository": UPSTREAM_REPOSITORY,
            "commit": UPSTREAM_COMMIT,
            "directory": str(self.directory) if self.directory is not None else None,
            "url": None if self.directory is not None else self.base_url,
        }

    def load(self, overlays: Iterable[tuple[str, str]]) -> dict[str, bytes]:
        """The bytes of each (path, sha256) overlay by path, every one verified.

        Raises:
            OverlayError: the first overlay that cannot be had or does not match its sha256.
        """
        found: dict[str, bytes] = {}
        for path, sha256 in overlays:
            _check_pins(path, sha256)
            if self.directory is not None:
                found[path] = self._from_directory(self.directory, path, sha256)
            else:
                found[path] = self._fetched(path, sha256)
        return found

    @staticmethod
    def _from_directory(directory: Path, path: str, sha256: str) -> bytes:
        try:
            data = (directory / path).read_bytes()
        except OSError as exc:
            raise OverlayError(f"overlay {path} is not readable under {directory} ({exc.strerror or exc}); "
                               f"--overlays-dir must be a checkout of {UPSTREAM_REPOSITORY} at commit "
                               f"{UPSTREAM_COMMIT}") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256:
            raise OverlayError(f"overlay {path} under {directory} has sha256 {digest}, the row pins {sha256}; "
                               f"use the file of {UPSTREAM_REPOSITORY} at commit {UPSTREAM_COMMIT}")
        return data

    def _fetched(self, path: str, sha256: str) -> bytes:
        cached = self._cached(sha256)
        if cached is not None:
            return cached
        url = f"{self.base_url}/{urllib.parse.quote(path)}"
        data = self._download(path, url)
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256:
            raise OverlayError(f"overlay {path} fetched from {url} has sha256 {digest}, the row pins {sha256}; that "
                               f"server does not hold the upstream file at commit {UPSTREAM_COMMIT}: fix "
                               f"--overlays-url / {URL_VARIABLE}, {_OFFLINE_HINT}")
        self._store(sha256, data)
        return data

    def _download(self, path: str, url: str) -> bytes:
        try:
            parts = urllib.parse.urlsplit(url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise OverlayError(f"overlay URL {url} is not an http(s) URL: set --overlays-url / {URL_VARIABLE} to a "
                               f"base URL such as {DEFAULT_BASE_URL}, {_OFFLINE_HINT}")
        host = parts.netloc
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as response:
                data: bytes = response.read(MAX_BYTES + 1)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise OverlayError(f"overlay {path} is not at {url} (HTTP 404): the base URL must serve the upstream "
                                   f"repository at commit {UPSTREAM_COMMIT}; fix --overlays-url / {URL_VARIABLE}, "
                                   f"{_OFFLINE_HINT}") from None
            raise OverlayError(f"overlay {path}: {host} answered HTTP {exc.code} {exc.reason} for {url}; retry the "
                               f"run later, {_OFFLINE_HINT}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise OverlayError(f"overlay {path}: cannot reach {host or url} ({_describe(reason)}, timeout "
                               f"{self.timeout:g} s); check the network or --overlays-url / {URL_VARIABLE}, "
                               f"{_OFFLINE_HINT}") from None
        if len(data) > MAX_BYTES:
            raise OverlayError(f"overlay {path}: {url} sent more than {MAX_BYTES} bytes, which no overlay has; fix "
                               f"--overlays-url / {URL_VARIABLE}, {_OFFLINE_HINT}")
        return data

    def _cached(self, sha256: str) -> bytes | None:
        """The cached file of this sha256, if there is one and it still matches; a stale one is removed."""
        file = self.cache_dir / f"{sha256}.patch"
        try:
            data = file.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(data).hexdigest() == sha256:
            return data
        try:
            file.unlink()
        except OSError:
            pass
        return None

    def _store(self, sha256: str, data: bytes) -> None:
        """Keep a verified file in the cache (atomically); a cache that cannot be written only costs a refetch."""
        try:
            write_atomic(self.cache_dir / f"{sha256}.patch", data)
        except OSError:
            pass


def _check_pins(path: str, sha256: str) -> None:
    """A row's overlay entry must name a relative path inside the repository and a sha256 in hex."""
    parts = PurePosixPath(path).parts
    if not path or path.startswith("/") or ".." in parts or "\\" in path:
        raise OverlayError(f"overlay path {path!r} is not a relative path inside the upstream repository; the "
                           "dataset rows are damaged: reload them from the published release")
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise OverlayError(f"overlay {path} is pinned to {sha256!r}, which is not a sha256 in lowercase hex; the "
                           "dataset rows are damaged: reload them from the published release")


def _describe(reason: object) -> str:
    text = str(reason) or type(reason).__name__
    return text if len(text) <= 200 else text[:200] + "..."
