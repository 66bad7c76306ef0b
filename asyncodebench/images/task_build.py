"""Build a task image from its recipe, push it, pin it and record it in an image map.

The build context holds the shared Dockerfile, the recipe's pinned requirements and the repository at the base
revision as a git repository of that one commit (so the image never carries the reference code of the parent
commit). `docker build` stamps the current time into layer files and the config, so two builds of one recipe get
different digests; what must not differ is the content, which `content_digest` hashes: every file's path, type,
mode, owner, link target and bytes, without times.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from asyncodebench.files import atomic_path
from asyncodebench.images import toolkit
from asyncodebench.images.recipes import DOCKERFILE, Recipe
from asyncodebench.images.registry import push_image
from asyncodebench.images.toolkit import ImageBuildError, add_bytes, docker, local_image_id, sha256_file

LOCAL_BASE = "local"  # --base local: the Debian base made here with mmdebstrap
LOCAL_BASE_PACKAGES = ("python3", "python3-venv", "git", "ca-certificates")
LOCAL_BASE_REPOSITORY = "asyncodebench/task-base"
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}


class BuildError(RuntimeError):
    """A build step failed; the message says which and what to do."""


@dataclass(frozen=True)
class BuiltTaskImage:
    """A rebuilt task image, pushed and pinned, with what its image map entry records."""

    task_id: str
    pinned_ref: str
    base_image: str
    base_image_digest: str
    recipe_sha256: str
    content_sha256: str
    python_version: str
    size_bytes: int
    built_at: str

    def map_entry(self) -> dict[str, Any]:
        """The image map's entry for the task (`provenance: rebuilt`)."""
        return {"pinned_ref": self.pinned_ref, "provenance": "rebuilt", "recipe_sha256": self.recipe_sha256,
                "base_image": self.base_image, "base_image_digest": self.base_image_digest,
                "content_sha256": self.content_sha256, "python_version": self.python_version,
                "built_at": self.built_at}


def _step(cmd: list[str], what: str, hint: str, **kwargs: Any) -> str:
    try:
        return toolkit.run_step(cmd, what, hint, **kwargs).stdout.strip()
    except ImageBuildError as exc:
        raise BuildError(str(exc)) from exc


# --- the repository --------------------------------------------------------------------------------------


def git(*args: str, cwd: Path | None = None) -> str:
    """Git's output, without global or system configuration; a failure raises `BuildError`."""
    return _step(["git", *args], f"git {args[0]}", "check the repository URL or path (--repo) and the network",
                 cwd=cwd, env={**os.environ, **GIT_ENV})


def fetch(repo: str, revision: str, cache: Path, depth: int = 1) -> Path:
    """A bare repository in the cache holding `revision` of `repo` (URL or local path) and `depth - 1` ancestors.

    Only the commits asked for are fetched, by id: a task needs its base revision (and, to validate, its parent),
    not the whole history, and a partial copy of a repository missing older objects still serves.
    """
    key = hashlib.sha256(repo.encode()).hexdigest()[:16]
    git_dir = cache / "repos" / f"{Path(repo.rstrip('/')).name.removesuffix('.git')}-{key}.git"
    if not git_dir.is_dir():
        with atomic_path(git_dir) as partial:
            git("init", "--quiet", "--bare", "--template=", str(partial))
            git("--git-dir", str(partial), "remote", "add", "origin", repo)
    have = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e", f"{revision}~{depth - 1}^{{commit}}"],
                          capture_output=True, env={**os.environ, **GIT_ENV}, check=False).returncode == 0
    if not have:
        # A local repository serves any commit by id only when told to (hosted ones, such as GitHub's, always do).
        upload_pack = "git -c uploadpack.allowAnySHA1InWant=true upload-pack"
        git("--git-dir", str(git_dir), "-c", "protocol.file.allow=always", "fetch", "--quiet", "--no-tags",
            f"--depth={depth}", f"--upload-pack={upload_pack}", "origin", revision)
    return git_dir


def testbed_at(mirror_dir: Path, revision: str, dest: Path) -> None:
    """`dest` becomes a git repository holding `revision` alone, checked out, with nothing machine-specific."""
    branch = "asyncodebench-base"
    git("--git-dir", str(mirror_dir), "branch", "--force", branch, revision)
    git("-c", "protocol.file.allow=always", "-c", "pack.threads=1", "clone", "--quiet", "--depth", "1",
         "--template=", "--branch", branch, f"file://{mirror_dir}", str(dest))
    git("-C", str(dest), "remote", "remove", "origin")
    git_dir = dest / ".git"
    for name in ("index", "logs", "description", "FETCH_HEAD", "ORIG_HEAD"):
        target = git_dir / name
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    git("-C", str(dest), "read-tree", "HEAD")  # an index without this machine's stat data
    head = git("-C", str(dest), "rev-parse", "HEAD")
    if head != revision:
        raise BuildError(f"the testbed is at {head}, not the base revision {revision}")


# --- the base image ---------------------------------------------------------------------------------------


def local_base(cache: Path) -> str:
    """The offline base: Debian's Python, venv and git from mmdebstrap, loaded with a fixed config (stable id)."""
    try:
        rootfs = toolkit.build_rootfs(LOCAL_BASE_PACKAGES, (), cache)
    except ImageBuildError as exc:
        raise BuildError(str(exc)) from exc
    layer = f"sha256:{sha256_file(rootfs)}"
    tag = f"{LOCAL_BASE_REPOSITORY}:bookworm-{layer[7:19]}"
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "created": toolkit.FIXED_DATE.replace("+00:00", "Z"),
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
                   "Cmd": ["/bin/bash"]},
        "rootfs": {"type": "layers", "diff_ids": [layer]},
        "history": [{"created_by": f"mmdebstrap {toolkit.DEBIAN_SUITE} + {' '.join(LOCAL_BASE_PACKAGES)}"}],
    }, sort_keys=True, separators=(",", ":")).encode()
    if local_image_id(tag) != f"sha256:{hashlib.sha256(config).hexdigest()}":
        manifest = [{"Config": "config.json", "RepoTags": [tag], "Layers": ["rootfs/layer.tar"]}]
        with tempfile.TemporaryFile() as archive:
            with tarfile.open(fileobj=archive, mode="w") as tar:
                add_bytes(tar, "manifest.json", json.dumps(manifest).encode())
                add_bytes(tar, "config.json", config)
                tar.add(str(rootfs), arcname="rootfs/layer.tar")
            archive.seek(0)
            _docker("load", "--quiet", stdin=archive)
    return tag


def _docker(*args: str, stdin: IO[bytes] | None = None) -> str:
    try:
        return docker(*args, stdin=stdin)
    except ImageBuildError as exc:
        raise BuildError(str(exc)) from exc


def image_digest(ref: str) -> str:
    """The registry digest of `ref` when it came from one, else its local image id."""
    info = json.loads(_docker("image", "inspect", "--format", "{{json .}}", ref))
    digests = info.get("RepoDigests") or []
    return digests[0].split("@", 1)[1] if digests else info["Id"]


def ensure_base(ref: str) -> None:
    """`ref` present locally, pulled when missing: before anything is fetched, and apart from `docker build`, whose
    failure would point at the pip pins.

    Raises:
        BuildError: it cannot be pulled (often: no Docker Hub here); the message suggests `--base local`.
    """
    if local_image_id(ref) is not None:
        return
    _step(["docker", "pull", "--quiet", ref], f"docker pull of the base image {ref}",
          f"without access to the registry of {ref} (Docker Hub for python:*-slim), build on a Debian base made on "
          "this machine instead: add --base local")


# --- the build --------------------------------------------------------------------------------------------


def _ca_bundle() -> bytes:
    """The CA file pip is told to trust on this machine (TLS-intercepting proxies), for the build stage only."""
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        path = os.environ.get(name)
        if path and Path(path).is_file():
            return Path(path).read_bytes()
    return b""


def _build_context(recipe: Recipe, repo: str, cache: Path, dest: Path) -> None:
    shutil.copyfile(DOCKERFILE, dest / "Dockerfile")
    (dest / "requirements.txt").write_text(recipe.requirements_txt())
    (dest / "pip-ca.pem").write_bytes(_ca_bundle())
    testbed_at(fetch(repo, recipe.base_revision, cache), recipe.base_revision, dest / "testbed")


def _docker_build(recipe: Recipe, context: Path, base: str, tag: str, no_cache: bool) -> None:
    args = [f"--build-arg=BASE_IMAGE={base}", *(f"--build-arg={k}={v}" for k, v in recipe.build_args().items())]
    # The host network: pip needs the package index, and some machines have no working bridge network.
    cmd = ["docker", "build", "--quiet", "--network=host", "--tag", tag, *args, *(["--no-cache"] if no_cache else []),
           str(context)]
    _step(cmd, "docker build", "the output above says which step failed; a pip error usually means a pin that "
          "does not exist for this Python, or no route to the package index", env={**os.environ,
                                                                                "DOCKER_BUILDKIT": "0"})


def content_digest(ref: str) -> str:
    """sha256 over the image's files (path, type, mode, owner, link, bytes; no times), in path order."""
    container = _docker("create", ref, "true")
    try:
        proc = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE)
        entries = []
        assert proc.stdout is not None
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for member in tar:
                data = tar.extractfile(member).read() if member.isfile() else b""  # type: ignore[union-attr]
                entries.append(json.dumps([member.name, member.type.decode(), member.mode, member.uid, member.gid,
                                           member.linkname, hashlib.sha256(data).hexdigest()]))
        if proc.wait() != 0:
            raise BuildError(f"docker export of {ref} failed")
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


def _python_version(ref: str) -> str:
    out = _docker("run", "--rm", "--network=none", "--entrypoint", "python", ref, "-c",
                  "import platform; print(platform.python_version())")
    return out.splitlines()[-1]


def push(tag: str) -> str:
    """Push and return `repo@sha256:...`."""
    try:
        digest = push_image(tag)
    except ImageBuildError as exc:
        raise BuildError(str(exc)) from exc
    return f"{tag.rsplit(':', 1)[0]}@{digest}"


def build(recipe: Recipe, repo: str, base: str | None, registry: str, cache: Path,
          no_cache: bool = False) -> BuiltTaskImage:
    """Build `recipe` on `base` (default python:<version>-slim; `local` for the offline base), push, pin."""
    base_ref = local_base(cache) if base == LOCAL_BASE else (base or recipe.default_base)
    ensure_base(base_ref)
    name = recipe.task_id.split(":", 1)[1]
    tag = f"{registry}/asyncodebench/{name}:rebuilt-{recipe.digest()[:12]}"
    with tempfile.TemporaryDirectory(prefix="asyncodebench-build-") as scratch:
        _build_context(recipe, repo, cache, Path(scratch))
        _docker_build(recipe, Path(scratch), base_ref, tag, no_cache)
    size = int(_docker("image", "inspect", "--format", "{{.Size}}", tag))
    return BuiltTaskImage(
        task_id=recipe.task_id, pinned_ref=push(tag), base_image=base_ref, base_image_digest=image_digest(base_ref),
        recipe_sha256=recipe.digest(), content_sha256=content_digest(tag), python_version=_python_version(tag),
        size_bytes=size, built_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )


def record(map_path: Path, built: BuiltTaskImage) -> dict[str, Any] | None:
    """Add or replace the task's entry in the image map at `map_path` (created when missing); return the entry it
    replaced (None when the task had none)."""
    data: dict[str, Any] = (json.loads(map_path.read_text()) if map_path.is_file()
                            else {"schema_version": "1", "images": {}})
    previous: dict[str, Any] | None = data["images"].get(built.task_id)
    data["images"][built.task_id] = built.map_entry()
    data["images"] = dict(sorted(data["images"].items()))
    with atomic_path(map_path) as partial:
        partial.write_text(json.dumps(data, indent=2) + "\n")
    return previous


def map_change(map_path: Path, previous: dict[str, Any] | None, built: BuiltTaskImage) -> str:
    """What the build did to the map, for the user: a new entry, the same image again, or a new pinned reference
    (a rebuild gives new layer times, so a new registry digest, even when the content is the same). A changed pin
    makes earlier validation records describe an image the map no longer names: say so, with the command to redo."""
    if previous is None:
        return f"{map_path}: new entry for {built.task_id}"
    old = previous.get("pinned_ref")
    if old == built.pinned_ref:
        return f"{map_path}: {built.task_id} pinned to the same image as before"
    content = ("the same content" if previous.get("content_sha256") == built.content_sha256
               else "different content")
    return (f"{map_path}: the pinned reference of {built.task_id} changed (updated in the map; {content}):\n"
            f"  was {old}\n  now {built.pinned_ref}\n"
            "validation and claim-check records made with the old image no longer describe the pinned one: rerun "
            f"python scripts/validate_task_image.py {built.task_id} --images {map_path}")
