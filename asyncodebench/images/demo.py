"""Build, push and pin the container image of the embedded demo task (`asyncodebench-demo:minicache`).

The demo must run on a machine with no access to Docker Hub, so the image is made from parts this
machine can produce: a Debian root filesystem from `mmdebstrap` (python3, pytest, git), the
pytest-json-report wheels from PyPI, and the demo repository committed at `/testbed` with a fixed
author, committer and date so its commit SHA (the task's `base_revision`) never changes.

The image is not made with `docker import` + `docker build`: both stamp the current time into the
image config, so every rebuild would get a new digest. Instead we write the `docker load` archive
ourselves (two layers and a config with fixed timestamps). The image id and the pushed manifest digest
are then a function of the rootfs tarball and the repository alone: a rebuild from the cached rootfs
gives the same digest, and so does a cold rebuild while Debian's package versions stay the same.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEMO_DIR = PROJECT_ROOT / "data" / "demo"
DEMO_REPO = DEMO_DIR / "repo"
DEMO_TASK_YAML = DEMO_DIR / "task.yaml"

IMAGE_REPOSITORY = "asyncodebench/demo-minicache"
IMAGE_TAG = "v0"
TESTBED = "/testbed"
DEFAULT_REGISTRY_PORT = 5000
REGISTRY_PORT_ENV = "ASYNCODEBENCH_REGISTRY_PORT"

# 2025-01-01T00:00:00Z: one date for the commit, the rootfs file times and the image config, so
# nothing in the image depends on when it was built.
FIXED_EPOCH = 1735689600
FIXED_DATE = "2025-01-01T00:00:00+00:00"
BASE_COMMIT_MESSAGE = "minicache: base state of the AsynCodeBench demo task\n"
BASE_COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "AsynCodeBench demo",
    "GIT_AUTHOR_EMAIL": "demo@asyncodebench.invalid",
    "GIT_AUTHOR_DATE": FIXED_DATE,
    "GIT_COMMITTER_NAME": "AsynCodeBench demo",
    "GIT_COMMITTER_EMAIL": "demo@asyncodebench.invalid",
    "GIT_COMMITTER_DATE": FIXED_DATE,
    # Keep the user's and the system's git configuration (hooks, templates, signing) out of it.
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

DEBIAN_SUITE = "bookworm"
DEBIAN_VARIANT = "apt"
DEBIAN_PACKAGES = ("python3", "python3-pytest", "git", "ca-certificates")
# Not packaged by Debian; pinned so the rootfs (and so the digest) only changes when we say so.
PYPI_WHEELS = ("pytest-json-report==1.5.0", "pytest-metadata==3.1.1")
SITE_PACKAGES = "usr/local/lib/python3.11/dist-packages"
HOST_APT_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")

IGNORED_NAMES = {"__pycache__", ".pytest_cache", ".benchmarks", ".git"}  # tool litter, not the repository


class DemoImageError(RuntimeError):
    """A build step failed; the message says which one and what to do about it."""


@dataclass(frozen=True)
class BuiltImage:
    """What a build produced; `pinned_ref` is what task rows and runners use."""

    pinned_ref: str
    digest: str
    image_id: str
    base_revision: str


def cache_dir() -> Path:
    """Where rootfs tarballs, wheels and the registry's storage live between builds."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "asyncodebench"


def registry_port_from_env() -> int:
    """The registry port of this run: `$ASYNCODEBENCH_REGISTRY_PORT`, else 5000."""
    raw = os.environ.get(REGISTRY_PORT_ENV, "")
    if not raw:
        return DEFAULT_REGISTRY_PORT
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise DemoImageError(f"{REGISTRY_PORT_ENV}={raw!r} is not a TCP port; set it to e.g. 5000")
    return int(raw)


def image_name(registry_port: int) -> str:
    """`127.0.0.1:<port>/asyncodebench/demo-minicache` (no tag, no digest)."""
    return f"127.0.0.1:{registry_port}/{IMAGE_REPOSITORY}"


def run_step(cmd: list[str], what: str, hint: str, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()[-2000:]
        raise DemoImageError(f"{what} failed (exit {result.returncode}): {detail}\n{hint}")
    return result


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **BASE_COMMIT_ENV}
    hint = "check that git is installed and the demo repository is readable"
    return run_step(["git", "-C", str(repo), *args], f"git {args[0]}", hint, env=env).stdout.strip()


# --- the base repository ---------------------------------------------------------------------


def make_base_repo(dest: Path, source: Path = DEMO_REPO) -> str:
    """Copy the demo repository to `dest`, commit it once with a fixed identity, return the SHA.

    The SHA depends only on file contents, file modes and `BASE_COMMIT_ENV`, so the same sources
    give the same `base_revision` on every machine. The index is rebuilt without stat data so the
    `.git` directory itself is byte-identical between builds (it goes into an image layer).
    """
    if not (source / "tests").is_dir():
        raise DemoImageError(f"{source} does not look like the demo repository (no tests/ folder)")
    if dest.exists() and any(dest.iterdir()):
        raise DemoImageError(f"{dest} is not empty; give make_base_repo a fresh directory")
    shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*IGNORED_NAMES))
    _git(dest, "init", "--quiet", "--initial-branch=main", "--template=")
    _git(dest, "add", "--all")
    _git(dest, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", BASE_COMMIT_MESSAGE)
    git_dir = dest / ".git"
    for name in ("index", "COMMIT_EDITMSG", "logs", "description"):
        target = git_dir / name
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    _git(dest, "read-tree", "HEAD")
    return _git(dest, "rev-parse", "HEAD")


# --- the root filesystem -----------------------------------------------------------------------


def _rootfs_key(packages: tuple[str, ...], wheels: tuple[str, ...]) -> str:
    recipe = json.dumps([DEBIAN_SUITE, DEBIAN_VARIANT, packages, wheels, FIXED_EPOCH])
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def _download_wheels(dest: Path, specs: tuple[str, ...]) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    wanted = {spec.split("==")[0].replace("-", "_") + "-" + spec.split("==")[1] for spec in specs}
    have = [w for w in dest.glob("*.whl") if "-".join(w.name.split("-")[:2]) in wanted]
    if len(have) == len(specs):
        return sorted(have)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--dest", str(dest), *specs]
    run_step(cmd, "pip download of the pytest-json-report wheels",
         "check that PyPI (or your pip index) is reachable, or put the wheels in " + str(dest))
    return sorted(w for w in dest.glob("*.whl") if "-".join(w.name.split("-")[:2]) in wanted)


def build_rootfs(cache: Path | None = None, packages: tuple[str, ...] = DEBIAN_PACKAGES,
                 wheels: tuple[str, ...] = PYPI_WHEELS) -> Path:
    """Return a cached Debian rootfs tarball with `packages` and `wheels`, made with mmdebstrap (about 20 s).

    SOURCE_DATE_EPOCH makes mmdebstrap's output byte-identical for identical package versions.
    """
    cache = cache or cache_dir()
    tarball = cache / f"rootfs-{DEBIAN_SUITE}-{_rootfs_key(packages, wheels)}.tar"
    if tarball.is_file():
        return tarball
    if shutil.which("mmdebstrap") is None:
        raise DemoImageError("mmdebstrap is not installed; run `apt-get install -y mmdebstrap`")
    hooks = []
    if wheels:
        unpack = " && ".join(
            f"{shlex.quote(sys.executable)} -m zipfile -e {shlex.quote(str(w))} \"$1/{SITE_PACKAGES}\""
            for w in _download_wheels(cache / "wheels", wheels)
        )
        hooks.append(f"--customize-hook=mkdir -p \"$1/{SITE_PACKAGES}\" && {unpack}")
    partial = tarball.with_name(tarball.name + ".part")
    cmd = ["mmdebstrap", "--format=tar", f"--variant={DEBIAN_VARIANT}", "--include=" + ",".join(packages),
           *hooks, DEBIAN_SUITE, str(partial)]
    if HOST_APT_SOURCES.is_file():
        cmd.append(str(HOST_APT_SOURCES))  # the machine's own mirror; no address written here
    cache.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(FIXED_EPOCH)}
    run_step(cmd, "mmdebstrap", "it needs root and a reachable Debian mirror (see /etc/apt/sources.list.d)",
         env=env, stdin=subprocess.DEVNULL)
    os.replace(partial, tarball)
    return tarball


def sha256_file(path: Path) -> str:
    """sha256 of a large file, remembered beside it so a cached build does not reread 270 MB."""
    memo = path.with_name(path.name + ".sha256")
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    if memo.is_file():
        saved_stamp, _, saved = memo.read_text().partition(" ")
        if saved_stamp == stamp:
            return saved.strip()
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    memo.write_text(f"{stamp} {digest.hexdigest()}\n")
    return digest.hexdigest()


# --- the image ---------------------------------------------------------------------------------


def _testbed_layer(repo: Path) -> bytes:
    """The `/testbed` layer: the committed repository with fixed owners, modes and times.

    Modes are normalised because git and the umask decide them on disk, and they vary by machine.
    """
    buf = io.BytesIO()
    root = TESTBED.lstrip("/")
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in [repo, *sorted(repo.rglob("*"))]:
            name = root if path == repo else f"{root}/{path.relative_to(repo).as_posix()}"
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = FIXED_EPOCH
            if info.isfile():
                info.mode = 0o755 if path.stat().st_mode & 0o100 else 0o644
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                info.mode = 0o755
                tar.addfile(info)
    return buf.getvalue()


def _image_config(diff_ids: list[str], base_revision: str) -> bytes:
    created = "2025-01-01T00:00:00Z"
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
            "Cmd": ["/bin/bash"],
            "WorkingDir": TESTBED,
            "Labels": {
                "org.opencontainers.image.title": "AsynCodeBench demo task minicache",
                "org.opencontainers.image.revision": base_revision,
                "org.opencontainers.image.licenses": "Apache-2.0",
            },
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [
            {"created": created, "created_by": f"mmdebstrap --variant={DEBIAN_VARIANT} {DEBIAN_SUITE} "
                                               f"+ {' '.join(DEBIAN_PACKAGES)} + {' '.join(PYPI_WHEELS)}"},
            {"created": created, "created_by": f"git commit {base_revision} at {TESTBED}"},
        ],
    }
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = FIXED_EPOCH
    tar.addfile(info, io.BytesIO(data))


def docker(*args: str, hint: str = "is dockerd running? try scripts/start_services.sh",
            stdin: IO[bytes] | None = None) -> str:
    return run_step(["docker", *args], f"docker {args[0]}", hint, stdin=stdin).stdout.strip()


def local_image_id(ref: str) -> str | None:
    result = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                            capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def load_image(rootfs: Path, repo: Path, base_revision: str, tag: str) -> str:
    """Make sure `tag` names the image built from `rootfs` and `repo`; return its image id.

    The image id is the sha256 of the config we write, so when `tag` already has it the
    (slow) load is skipped.
    """
    testbed = _testbed_layer(repo)
    diff_ids = [f"sha256:{sha256_file(rootfs)}", f"sha256:{hashlib.sha256(testbed).hexdigest()}"]
    config = _image_config(diff_ids, base_revision)
    image_id = f"sha256:{hashlib.sha256(config).hexdigest()}"
    if local_image_id(tag) == image_id:
        return image_id
    manifest = [{"Config": "config.json", "RepoTags": [tag], "Layers": ["rootfs/layer.tar", "testbed/layer.tar"]}]
    with tempfile.TemporaryFile() as archive:
        with tarfile.open(fileobj=archive, mode="w") as tar:
            add_bytes(tar, "manifest.json", json.dumps(manifest).encode())
            add_bytes(tar, "config.json", config)
            tar.add(str(rootfs), arcname="rootfs/layer.tar")
            add_bytes(tar, "testbed/layer.tar", testbed)
        archive.seek(0)
        docker("load", "--quiet", stdin=archive)
    loaded = local_image_id(tag)
    if loaded != image_id:
        raise DemoImageError(f"docker load gave {tag} the id {loaded}, expected {image_id}; "
                             "remove the image (`docker rmi " + tag + "`) and build again")
    return image_id


def push_image(tag: str) -> str:
    """Push `tag` and return the manifest digest the registry recorded for it."""
    docker("push", "--quiet", tag, hint="is the registry up? run scripts/start_services.sh")
    repo_digests = json.loads(docker("image", "inspect", "--format", "{{json .RepoDigests}}", tag))
    name = tag.rsplit(":", 1)[0]
    for entry in repo_digests:
        if entry.startswith(name + "@sha256:"):
            return entry.split("@", 1)[1]
    raise DemoImageError(f"after pushing {tag}, docker lists no digest for {name} (got {repo_digests}); "
                         "check the registry log in " + str(cache_dir()))


# --- the registry ------------------------------------------------------------------------------


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
        raise DemoImageError("docker-registry is not installed; run `apt-get install -y docker-registry`")
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
    raise DemoImageError(f"the registry did not answer on 127.0.0.1:{port}; see {state / 'registry.log'} "
                         f"(is the port taken? set {REGISTRY_PORT_ENV} to a free one)")


# --- the whole build ---------------------------------------------------------------------------


def build(registry_port: int = DEFAULT_REGISTRY_PORT, source: Path = DEMO_REPO) -> BuiltImage:
    """Build the demo image, push it to the local registry and return where it is pinned."""
    ensure_registry(registry_port)
    rootfs = build_rootfs()
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
        raise DemoImageError(f"{digest!r} is not a sha256 digest")
    text = task_yaml.read_text()
    if len(_DIGEST_LINE.findall(text)) != 1:
        raise DemoImageError(f"{task_yaml} needs exactly one `container_digest: sha256:<64 hex>` line")
    updated = _DIGEST_LINE.sub(f"container_digest: {digest}", text)
    if updated == text:
        return False
    task_yaml.write_text(updated)
    return True
