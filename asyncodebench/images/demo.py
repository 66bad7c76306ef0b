"""The embedded demo tasks: their image recipes, their builds and their pins.

Two tasks, each a `DemoTask`: `MINICACHE` (`data/demo/`, the pure-Python minicache repository, the default
everywhere) and `NATIVE_DEMO` (`data/demo-native/`, vecstats: a C++ library built with CMake and Ninja, and a
Python package that calls it through ctypes).

The demos must run on a machine with no access to Docker Hub, so their images are made with the image toolkit
(`toolkit`) from parts this machine can produce: a Debian root filesystem from `mmdebstrap` (python3, pytest, git,
and for vecstats cmake, ninja-build and g++), the pytest-json-report wheels from PyPI, and the demo repository
committed at `/testbed` with a fixed author, committer and date so its commit SHA (the task's `base_revision`)
never changes. A native task's image has one more layer: its build tree, configured and built at the base state
in a container of the image without it (no network), at `/testbed/build`, with times later than the sources' so
that the harness's incremental build (`data/native_builds.yaml`) has nothing to do at base. The image is pushed to
the local registry (`registry`) and the task source (`task.yaml`) is pinned to the digest it gets there.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from asyncodebench.files import atomic_path
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

# The build tree's file times: one hour after the sources' (toolkit.FIXED_EPOCH, which the rootfs is clamped to as
# well), so every output is newer than every input and ninja finds the tree up to date.
BUILD_TREE_EPOCH = toolkit.FIXED_EPOCH + 3600


@dataclass(frozen=True)
class DemoTask:
    """One embedded demo task: its folder (task.yaml, task.md, repo/, patches/, predictions/) and image recipe.

    A native task also names the commands that configure and build its tree at base (`configure`, `build`, run in
    `/testbed` in that order) and the folder they make (`build_dir`, relative to `/testbed`), which becomes the
    image's last layer.
    """

    name: str
    folder: Path
    image_repository: str
    debian_packages: tuple[str, ...]
    commit_message: str
    title: str
    build_dir: str | None = None
    configure: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    @property
    def repo(self) -> Path:
        """The repository committed at /testbed."""
        return self.folder / "repo"

    @property
    def task_yaml(self) -> Path:
        """The task source, whose `container_digest` line `write_digest` updates."""
        return self.folder / "task.yaml"


MINICACHE = DemoTask(
    name="minicache",
    folder=DEMO_DIR,
    image_repository=IMAGE_REPOSITORY,
    debian_packages=DEBIAN_PACKAGES,
    commit_message=BASE_COMMIT_MESSAGE,
    title="AsynCodeBench demo task minicache",
)
NATIVE_DEMO = DemoTask(
    name="vecstats",
    folder=PROJECT_ROOT / "data" / "demo-native",
    image_repository="asyncodebench/demo-vecstats",
    debian_packages=(*DEBIAN_PACKAGES, "cmake", "ninja-build", "g++"),
    commit_message="vecstats: base state of the AsynCodeBench native demo task\n",
    title="AsynCodeBench demo task vecstats",
    build_dir="build",
    configure=("cmake", "-S", ".", "-B", "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"),
    build=("cmake", "--build", "build"),
)
DEMO_TASKS = {task.name: task for task in (MINICACHE, NATIVE_DEMO)}


@dataclass(frozen=True)
class BuiltImage:
    """What a build produced; `pinned_ref` is what task rows and runners use."""

    pinned_ref: str
    digest: str
    image_id: str
    base_revision: str


def image_name(registry_port: int, task: DemoTask = MINICACHE) -> str:
    """`127.0.0.1:<port>/asyncodebench/demo-minicache` (or the task's repository; no tag, no digest)."""
    return f"127.0.0.1:{registry_port}/{task.image_repository}"


def make_base_repo(dest: Path, source: Path | None = None, task: DemoTask = MINICACHE) -> str:
    """Copy the demo repository (`source`, by default the task's) to `dest`, commit it once with the toolkit's fixed
    identity, return the SHA.

    The same sources give the same `base_revision` on every machine (see `toolkit.commit_tree`). A native task's
    build folder, if someone built in the source, is left out.
    """
    source = source or task.repo
    if not (source / "tests").is_dir():
        raise ImageBuildError(f"{source} does not look like the demo repository (no tests/ folder)")
    litter = (task.build_dir,) if task.build_dir else ()
    return toolkit.commit_tree(source, dest, task.commit_message, also_ignored=litter)


def _build_script(task: DemoTask) -> str:
    return f"{shlex.join(task.configure)} && {shlex.join(task.build)}"


def _image_config(diff_ids: list[str], base_revision: str, task: DemoTask = MINICACHE) -> bytes:
    history = [
        f"mmdebstrap --variant={toolkit.DEBIAN_VARIANT} {toolkit.DEBIAN_SUITE} "
        f"+ {' '.join(task.debian_packages)} + {' '.join(PYPI_WHEELS)}",
        f"git commit {base_revision} at {TESTBED}",
    ]
    if len(diff_ids) > 2:
        history.append(f"{_build_script(task)} in {TESTBED} (network none): {TESTBED}/{task.build_dir}")
    labels = {
        "org.opencontainers.image.title": task.title,
        "org.opencontainers.image.revision": base_revision,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    return toolkit.image_config(diff_ids, history, TESTBED, labels)


def _load(rootfs: Path, layers: dict[str, bytes], base_revision: str, tag: str, task: DemoTask) -> str:
    diff_ids = [f"sha256:{toolkit.sha256_file(rootfs)}", *(f"sha256:{hashlib.sha256(layer).hexdigest()}"
                                                         for layer in layers.values())]
    return toolkit.load_image(tag, _image_config(diff_ids, base_revision, task), rootfs, layers)


def load_image(rootfs: Path, repo: Path, base_revision: str, tag: str, task: DemoTask = MINICACHE) -> str:
    """Make sure `tag` names the image of `rootfs` with `repo` at /testbed (no build tree); return its image id."""
    return _load(rootfs, {"testbed": toolkit.directory_layer(repo, TESTBED)}, base_revision, tag, task)


def build_tree_layer(task: DemoTask, rootfs: Path, testbed: bytes, base_revision: str, tag: str) -> bytes:
    """The layer of `task`'s build tree at base: configured and built in a container of the image without it.

    Cached beside the rootfs, keyed by what it is made from (the rootfs, the /testbed layer and the commands):
    compilers and CMake write logs and timings that differ on every build, so a cached tree is what keeps the
    image's digest the same from one build to the next on a machine. The image without the tree is tagged
    `<tag>-source` (`build` untags it once the whole image is loaded; after a failure it stays, to look into).
    """
    if not task.build_dir:
        raise ImageBuildError(f"the demo task {task.name} has no build tree")
    recipe = [toolkit.sha256_file(rootfs), hashlib.sha256(testbed).hexdigest(), _build_script(task),
              task.build_dir, BUILD_TREE_EPOCH]
    key = hashlib.sha256(json.dumps(recipe).encode()).hexdigest()[:16]
    cached = toolkit.cache_dir() / "build-trees" / f"{task.name}-{key}.tar"
    if cached.is_file():
        return cached.read_bytes()
    source_tag = f"{tag}-source"
    _load(rootfs, {"testbed": testbed}, base_revision, source_tag, task)
    layer = toolkit.container_layer(source_tag, ["bash", "-c", f"cd {TESTBED} && {_build_script(task)}"],
                                    f"{TESTBED}/{task.build_dir}", BUILD_TREE_EPOCH)
    with atomic_path(cached) as partial:
        partial.write_bytes(layer)
    return layer


def build(registry_port: int = DEFAULT_REGISTRY_PORT, source: Path | None = None,
          task: DemoTask = MINICACHE) -> BuiltImage:
    """Build the demo task's image (minicache unless `task` says otherwise), push it to the local registry and return
    where it is pinned."""
    ensure_registry(registry_port)
    rootfs = toolkit.build_rootfs(task.debian_packages, PYPI_WHEELS)
    tag = f"{image_name(registry_port, task)}:{IMAGE_TAG}"
    with tempfile.TemporaryDirectory(prefix=f"asyncodebench-demo-{task.name}-") as scratch:
        repo = Path(scratch) / "testbed"
        base_revision = make_base_repo(repo, source, task)
        layers = {"testbed": toolkit.directory_layer(repo, TESTBED)}
    if task.build_dir:
        layers["build"] = build_tree_layer(task, rootfs, layers["testbed"], base_revision, tag)
    image_id = _load(rootfs, layers, base_revision, tag, task)
    if toolkit.local_image_id(f"{tag}-source"):  # left by build_tree_layer; its layers are the image's too
        toolkit.docker("rmi", "--no-prune", f"{tag}-source")
    digest = push_image(tag)
    return BuiltImage(f"{image_name(registry_port, task)}@{digest}", digest, image_id, base_revision)


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
