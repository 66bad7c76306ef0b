"""The local image registry on 127.0.0.1: which port, starting it, and pushing an image to it.

Images built here are pushed to it so that runners pin them by the manifest digest the registry records.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from asyncodebench.images.toolkit import ImageBuildError, cache_dir, docker

DEFAULT_REGISTRY_PORT = 5000
REGISTRY_PORT_ENV = "ASYNCODEBENCH_REGISTRY_PORT"


def registry_port_from_env() -> int:
    """The registry port of this run: `$ASYNCODEBENCH_REGISTRY_PORT`, else 5000."""
    raw = os.environ.get(REGISTRY_PORT_ENV, "")
    if not raw:
        return DEFAULT_REGISTRY_PORT
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ImageBuildError(f"{REGISTRY_PORT_ENV}={raw!r} is not a TCP port; set it to e.g. 5000")
    return int(raw)


def registry_answers(port: int) -> bool:
    """True when a Docker registry (API v2) answers on 127.0.0.1:`port`."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def ensure_registry(port: int = DEFAULT_REGISTRY_PORT, timeout: float = 30.0) -> None:
    """Start Debian's `docker-registry` on 127.0.0.1:`port` unless one already answers there.

    Storage lives in the cache directory, so pushed images survive a restart of the registry and
    a second build only has to check that the blobs are there.
    """
    if registry_answers(port):
        return
    binary = shutil.which("docker-registry")
    if binary is None:
        raise ImageBuildError("docker-registry is not installed; run `apt-get install -y docker-registry`")
    state = cache_dir() / f"registry-{port}"
    (state / "storage").mkdir(parents=True, exist_ok=True)
    config_dir = Path(tempfile.mkdtemp(prefix=f"asyncodebench-registry-{port}-"))
    config = config_dir / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        "storage:\n"
        f"  filesystem:\n    rootdirectory: {state / 'storage'}\n"
        "  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = (state / "registry.log").open("ab")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    (state / "registry.pid").write_text(f"{process.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if registry_answers(port):
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise ImageBuildError(f"the registry did not answer on 127.0.0.1:{port}; see {state / 'registry.log'} "
                          f"(is the port taken? set {REGISTRY_PORT_ENV} to a free one)")


def push_image(tag: str) -> str:
    """Push `tag` and return the manifest digest the registry recorded for it."""
    docker("push", "--quiet", tag, hint="is the registry up? run scripts/start_services.sh")
    repo_digests = json.loads(docker("image", "inspect", "--format", "{{json .RepoDigests}}", tag))
    name = tag.rsplit(":", 1)[0]
    for entry in repo_digests:
        if entry.startswith(name + "@sha256:"):
            return entry.split("@", 1)[1]
    raise ImageBuildError(f"after pushing {tag}, docker lists no digest for {name} (got {repo_digests}); "
                          "check the registry log in " + str(cache_dir()))
