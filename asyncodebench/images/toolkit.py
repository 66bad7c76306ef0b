"""Reproducible container images made on this machine, with no access to Docker Hub: the parts a task image is
built from, whatever the task.

- a Debian root filesystem from `mmdebstrap` with the packages asked for, plus wheels from PyPI (`build_rootfs`);
- a repository committed once with a fixed author, committer and date, so its commit SHA never changes
  (`commit_tree`), and a directory as an image layer with fixed owners, modes and times (`directory_layer`);
- a folder that a command made in a container of an image, as a further layer with fixed owners and times
  (`container_layer`: a native task's configured and built tree);
- an image config with fixed timestamps (`image_config`) and the `docker load` archive of the layers
  (`load_image`).

The image is not made with `docker import` + `docker build`: both stamp the current time into the image config, so
every rebuild would get a new digest. Writing the `docker load` archive ourselves makes the image id a function of
the layers and the config alone: a rebuild from the cached rootfs gives the same digest, and so does a cold rebuild
while Debian's package versions stay the same. Pushing to the local registry is `registry`'s job.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from asyncodebench.files import atomic_path

# 2025-01-01T00:00:00Z: one date for the commit, the rootfs file times and the image config, so
# nothing in the image depends on when it was built.
FIXED_EPOCH = 1735689600
FIXED_DATE = "2025-01-01T00:00:00+00:00"
COMMIT_ENV = {
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
SITE_PACKAGES = "usr/local/lib/python3.11/dist-packages"  # where wheels are unpacked (bookworm's python3)
HOST_APT_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")

IGNORED_NAMES = {"__pycache__", ".pytest_cache", ".benchmarks", ".git"}  # tool litter, not the repository


class ImageBuildError(RuntimeError):
    """A build step failed; the message says which one and what to do about it."""


def cache_dir() -> Path:
    """Where rootfs tarballs, wheels and the registry's storage live between builds."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "asyncodebench"


def run_step(cmd: list[str], what: str, hint: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run `cmd` with its output captured as text; a failure raises `ImageBuildError` with `what`, its output's end
    and `hint`."""
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()[-2000:]
        raise ImageBuildError(f"{what} failed (exit {result.returncode}): {detail}\n{hint}")
    return result


def docker(*args: str, hint: str = "is dockerd running? try scripts/start_services.sh",
            stdin: IO[bytes] | None = None) -> str:
    """The output of a docker command; a failure raises `ImageBuildError` with `hint`."""
    return run_step(["docker", *args], f"docker {args[0]}", hint, stdin=stdin).stdout.strip()


def local_image_id(ref: str) -> str | None:
    """The id of the local image `ref`, or None when there is none."""
    result = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                            capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


# --- the repository ----------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **COMMIT_ENV}
    hint = "check that git is installed and the source repository is readable"
    return run_step(["git", "-C", str(repo), *args], f"git {args[0]}", hint, env=env).stdout.strip()


def commit_tree(source: Path, dest: Path, message: str, also_ignored: tuple[str, ...] = ()) -> str:
    """Copy `source` to `dest`, commit it once with a fixed identity (`COMMIT_ENV`), return the SHA.

    The SHA depends only on file contents, file modes, `message` and `COMMIT_ENV`, so the same sources give the
    same revision on every machine. The index is rebuilt without stat data so the `.git` directory itself is
    byte-identical between builds (it goes into an image layer). `also_ignored` names more litter to leave out
    (such as a build folder someone made in the source), at any depth, like `IGNORED_NAMES`.
    """
    if dest.exists() and any(dest.iterdir()):
        raise ImageBuildError(f"{dest} is not empty; give commit_tree a fresh directory")
    ignored = shutil.ignore_patterns(*IGNORED_NAMES, *also_ignored)
    shutil.copytree(source, dest, dirs_exist_ok=True, ignore=ignored)
    _git(dest, "init", "--quiet", "--initial-branch=main", "--template=")
    _git(dest, "add", "--all")
    _git(dest, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message)
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
    run_step(cmd, f"pip download of the wheels {' '.join(specs)}",
             "check that PyPI (or your pip index) is reachable, or put the wheels in " + str(dest))
    return sorted(w for w in dest.glob("*.whl") if "-".join(w.name.split("-")[:2]) in wanted)


def build_rootfs(packages: tuple[str, ...], wheels: tuple[str, ...] = (), cache: Path | None = None) -> Path:
    """Return a cached Debian rootfs tarball with `packages` and `wheels` (`name==version` pins, unpacked into
    SITE_PACKAGES), made with mmdebstrap (about 20 s).

    SOURCE_DATE_EPOCH makes mmdebstrap's output byte-identical for identical package versions.
    """
    cache = cache or cache_dir()
    tarball = cache / f"rootfs-{DEBIAN_SUITE}-{_rootfs_key(packages, wheels)}.tar"
    if tarball.is_file():
        return tarball
    if shutil.which("mmdebstrap") is None:
        raise ImageBuildError("mmdebstrap is not installed; run `apt-get install -y mmdebstrap`")
    hooks = []
    if wheels:
        unpack = " && ".join(
            f"{shlex.quote(sys.executable)} -m zipfile -e {shlex.quote(str(w))} \"$1/{SITE_PACKAGES}\""
            for w in _download_wheels(cache / "wheels", wheels)
        )
        hooks.append(f"--customize-hook=mkdir -p \"$1/{SITE_PACKAGES}\" && {unpack}")
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(FIXED_EPOCH)}
    with atomic_path(tarball) as partial:
        cmd = ["mmdebstrap", "--format=tar", f"--variant={DEBIAN_VARIANT}", "--include=" + ",".join(packages),
               *hooks, DEBIAN_SUITE, str(partial)]
        if HOST_APT_SOURCES.is_file():
            cmd.append(str(HOST_APT_SOURCES))  # the machine's own mirror; no address written here
        run_step(cmd, "mmdebstrap", "it needs root and a reachable Debian mirror (see /etc/apt/sources.list.d)",
                 env=env, stdin=subprocess.DEVNULL)
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


def directory_layer(source: Path, at: str) -> bytes:
    """A layer holding `source` at the absolute path `at`, with fixed owners, modes and times.

    Modes are normalised because git and the umask decide them on disk, and they vary by machine.
    """
    buf = io.BytesIO()
    root = at.lstrip("/")
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in [source, *sorted(source.rglob("*"))]:
            name = root if path == source else f"{root}/{path.relative_to(source).as_posix()}"
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


def container_layer(image: str, command: Sequence[str], path: str, mtime: int) -> bytes:
    """Run `command` in a container of `image` with no network, then return the folder `path` it left as a layer.

    The layer holds `path` at the same place, owned by root, every time set to `mtime`, entries in name order: a
    native task's build tree, configured and built at the base state inside the image it then joins (its
    absolute paths, compiler and headers are the image's). `mtime` must be later than the sources' times so that
    an incremental build on the tree finds nothing to do. A failing command raises `ImageBuildError` with the end
    of its output.
    """
    name = f"asyncodebench-layer-{os.getpid()}-{hashlib.sha256(os.urandom(8)).hexdigest()[:8]}"
    docker("create", "--name", name, "--network", "none", "--entrypoint", "", image, *command)
    try:
        run_step(["docker", "start", "--attach", name], f"{shlex.join(command)} in {image}",
                 "the command failed in the image; run it by hand with `docker run --rm -it --network none "
                 f"{image} bash`", stdin=subprocess.DEVNULL)
        copied = subprocess.run(["docker", "cp", f"{name}:{path}", "-"], capture_output=True, check=False)
        if copied.returncode != 0:
            raise ImageBuildError(f"docker cp of {path} failed: {copied.stderr.decode(errors='replace')[-2000:]}")
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True, check=False)
    parent = path.rstrip("/").rsplit("/", 1)[0].lstrip("/")
    buf = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(copied.stdout), mode="r:") as source, \
            tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info in sorted(source.getmembers(), key=lambda m: m.name):
            data = source.extractfile(info) if info.isfile() else None
            info.name = f"{parent}/{info.name}" if parent else info.name
            if info.islnk():  # a hard link names its target by its path in the archive
                info.linkname = f"{parent}/{info.linkname}" if parent else info.linkname
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = mtime
            info.mode &= 0o7777
            info.pax_headers = {}  # docker cp adds access and change times, which differ on every run
            tar.addfile(info, data)
    return buf.getvalue()


def image_config(diff_ids: Sequence[str], history: Sequence[str], working_dir: str,
                 labels: Mapping[str, str]) -> bytes:
    """The image config (its sha256 is the image id): one `history` line per layer, every time FIXED_DATE."""
    created = FIXED_DATE.replace("+00:00", "Z")
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
            "Cmd": ["/bin/bash"],
            "WorkingDir": working_dir,
            "Labels": dict(labels),
        },
        "rootfs": {"type": "layers", "diff_ids": list(diff_ids)},
        "history": [{"created": created, "created_by": line} for line in history],
    }
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    """Add `data` to `tar` as the file `name`, with the fixed time so the archive is reproducible."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = FIXED_EPOCH
    tar.addfile(info, io.BytesIO(data))


def load_image(tag: str, config: bytes, rootfs: Path, layers: Mapping[str, bytes]) -> str:
    """Make sure `tag` names the image of `config` over the `rootfs` tarball and then `layers` (name: layer tar, in
    order); return its image id.

    The image id is the sha256 of the config, so when `tag` already has it the (slow) load is skipped.
    """
    image_id = f"sha256:{hashlib.sha256(config).hexdigest()}"
    if local_image_id(tag) == image_id:
        return image_id
    names = [f"{name}/layer.tar" for name in layers]
    manifest = [{"Config": "config.json", "RepoTags": [tag], "Layers": ["rootfs/layer.tar", *names]}]
    with tempfile.TemporaryFile() as archive:
        with tarfile.open(fileobj=archive, mode="w") as tar:
            add_bytes(tar, "manifest.json", json.dumps(manifest).encode())
            add_bytes(tar, "config.json", config)
            tar.add(str(rootfs), arcname="rootfs/layer.tar")
            for name, layer in zip(names, layers.values()):
                add_bytes(tar, name, layer)
        archive.seek(0)
        docker("load", "--quiet", stdin=archive)
    loaded = local_image_id(tag)
    if loaded != image_id:
        raise ImageBuildError(f"docker load gave {tag} the id {loaded}, expected {image_id}; "
                              "remove the image (`docker rmi " + tag + "`) and build again")
    return image_id
