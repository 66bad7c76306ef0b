"""The embedded demo task (`data/demo/`, the minicache repository): its image recipe, its build and its pin.

The demo must run on a machine with no access to Docker Hub, so its image is made with the image toolkit
(`toolkit`) from parts this machine can produce: a Debian root filesystem from `mmdebstrap` (python3, pytest, git),
the pytest-json-report wheels from PyPI, and the demo repository committed at `/testbed` with a fixed author,
committer and date so its commit SHA (the task's `base_revision`) never changes. The image is pushed to the local
registry (`registry`) and the task source `data/demo/task.yaml` is pinned to the digest it gets there.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from asyncodebench.images import toolkit
from asyncodebench.images.registry import DEFAULT_REGISTRY_PORT, ensure_registry, push_image
from asyncodebench.images.toolkit import ImageBuildError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEMO_DIR = PROJECT_ROOT / "data" / "demo"
DEMO_REPO = DEMO_DIR / "repo"
DEMO_TASK_YAML = DEMO_DIR / "task.yaml"

IMAGE_REPOSITORY = "asyncodebench/demo-minicache"
IMAGE_TAG = "v0"
TESTBED = "/testbed"
BASE_COMMIT_MESSAGE = "minicache: base state of the AsynCodeBench demo task\n"

DEBIAN_PACKAGES = ("python3", "python3-pytest", "git", "ca-certificates")
# Not packaged by Debian; pinned so the rootfs (and so the digest) only changes when we say so.
PYPI_WHEELS = ("pytest-json-report==1.5.0", "pytest-metadata==3.1.1")


@dataclass(frozen=True)
class BuiltImage:
    """What a build produced; `pinned_ref` is what task rows and runners use."""

    pinned_ref: str
    digest: str
    image_id: str
    base_revision: str


def image_name(registry_port: int) -> str:
    """`127.0.0.1:<port>/asyncodebench/demo-minicache` (no tag, no digest)."""
    return f"127.0.0.1:{registry_port}/{IMAGE_REPOSITORY}"


def make_base_repo(dest: Path, source: Path = DEMO_REPO) -> str:
    """Copy the demo repository to `dest`, commit it once with the toolkit's fixed identity, return the SHA.

    The same sources give the same `base_revision` on every machine (see `toolkit.commit_tree`).
    """
    if not (source / "tests").is_dir():
        raise ImageBuildError(f"{source} does not look like the demo repository (no tests/ folder)")
    return toolkit.commit_tree(source, dest, BASE_COMMIT_MESSAGE)


def _image_config(diff_ids: list[str], base_revision: str) -> bytes:
    history = [
        f"mmdebstrap --variant={toolkit.DEBIAN_VARIANT} {toolkit.DEBIAN_SUITE} "
        f"+ {' '.join(DEBIAN_PACKAGES)} + {' '.join(PYPI_WHEELS)}",
        f"git commit {base_revision} at {TESTBED}",
    ]
    labels = {
        "org.opencontainers.image.title": "AsynCodeBench demo task minicache",
        "org.opencontainers.image.revision": base_revision,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    return toolkit.image_config(diff_ids, history, TESTBED, labels)


def load_image(rootfs: Path, repo: Path, base_revision: str, tag: str) -> str:
    """Make sure `tag` names the demo image of `rootfs` with `repo` at /testbed; return its image id."""
    testbed = toolkit.directory_layer(repo, TESTBED)
    diff_ids = [f"sha256:{toolkit.sha256_file(rootfs)}", f"sha256:{hashlib.sha256(testbed).hexdigest()}"]
    return toolkit.load_image(tag, _image_config(diff_ids, base_revision), rootfs, {"testbed": testbed})


def build(registry_port: int = DEFAULT_REGISTRY_PORT, source: Path = DEMO_REPO) -> BuiltImage:
    """Build the demo image, push it to the local registry and return where it is pinned."""
    ensure_registry(registry_port)
    rootfs = toolkit.build_rootfs(DEBIAN_PACKAGES, PYPI_WHEELS)
    tag = f"{image_name(registry_port)}:{IMAGE_TAG}"
    with tempfile.TemporaryDirectory(prefix="asyncodebench-demo-") as scratch:
        repo = Path(scratch) / "testbed"
        base_revision = make_base_repo(repo, source)
        image_id = load_image(rootfs, repo, base_revision, tag)
    digest = push_image(tag)
    return BuiltImage(f"{image_name(registry_port)}@{digest}", digest, image_id, base_revision)


_DIGEST_LINE = re.compile(r"^container_digest: sha256:[0-9a-f]{64}$", re.MULTILINE)


def write_digest(digest: str, task_yaml: Path = DEMO_TASK_YAML) -> bool:
    """Put `digest` into the task source's `container_digest` line; True when the file changed.

    A line edit rather than a YAML round trip, so the hand-written file keeps its layout.
    """
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ImageBuildError(f"{digest!r} is not a sha256 digest")
    text = task_yaml.read_text()
    if len(_DIGEST_LINE.findall(text)) != 1:
        raise ImageBuildError(f"{task_yaml} needs exactly one `container_digest: sha256:<64 hex>` line")
    updated = _DIGEST_LINE.sub(f"container_digest: {digest}", text)
    if updated == text:
        return False
    task_yaml.write_text(updated)
    return True
