"""Check that each task's pinned image is the one on this machine (or in its registry), by digest.

An image matches when the pinned `repo@sha256:...` is among its `RepoDigests`; the image id is never compared (it
differs between registries and platforms). Anything else is refused before a container starts.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any

MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])

MATCH, MISMATCH, MISSING, UNREACHABLE = "match", "mismatch", "missing", "unreachable"


@dataclass(frozen=True)
class ImageStatus:
    """What was found for one task's pinned image. `found_digests` lists the digests seen instead."""

    task_id: str
    pinned_ref: str
    state: str  # match | mismatch | missing | unreachable
    found_digests: tuple[str, ...] = ()
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The status as a JSON object, one key per field."""
        return asdict(self)


def split_reference(image: str) -> tuple[str, str, str]:
    """`registry/name:tag` -> (registry, name, tag); Docker Hub names get the `library/` prefix they imply.

    A digest reference `registry/name@sha256:...` gives the digest as its tag (registries serve manifests by both).
    """
    if "@" in image:
        name, tag = image.split("@", 1)
    else:
        name, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "latest")
    registry, _, path = name.partition("/")
    if "." not in registry and ":" not in registry and registry != "localhost":
        registry, path = "docker.io", name
    if registry == "docker.io" and "/" not in path:
        path = f"library/{path}"
    return registry, path, tag or "latest"


def _repository_of(pinned_ref: str) -> str:
    return pinned_ref.split("@", 1)[0]


def local_status(client: Any, task_id: str, image: str, pinned_ref: str) -> ImageStatus:
    """Compare the pinned digest with the local images' `RepoDigests` (tag or digest reference)."""
    import docker.errors

    digest = pinned_ref.split("@", 1)[1]
    seen: list[str] = []
    for ref in (pinned_ref, image):
        try:
            repo_digests = client.images.get(ref).attrs.get("RepoDigests") or []
        except docker.errors.ImageNotFound:
            continue
        if any(d.endswith("@" + digest) and _same_repo(d, pinned_ref) for d in repo_digests):
            return ImageStatus(task_id, pinned_ref, MATCH, (digest,))
        seen += [d.split("@", 1)[1] for d in repo_digests if "@" in d]
    if seen:
        return ImageStatus(task_id, pinned_ref, MISMATCH, tuple(dict.fromkeys(seen)),
                           "the local image has another digest; it will not be run (pull the pinned digest)")
    return ImageStatus(task_id, pinned_ref, MISSING, (), "not on this machine; run with --pull")


def _same_repo(repo_digest: str, pinned_ref: str) -> bool:
    """`cachetools@sha256:..` from `docker.io/wentingzhao/cachetools@..`: Docker drops the docker.io prefix."""
    ours = split_reference(_repository_of(pinned_ref) + ":x")[:2]
    theirs = split_reference(_repository_of(repo_digest) + ":x")[:2]
    return ours == theirs


def pull(client: Any, task_id: str, image: str, pinned_ref: str) -> ImageStatus:
    """Pull by digest (never by tag), then check again."""
    import docker.errors

    try:
        client.images.pull(pinned_ref)
    except docker.errors.DockerException as exc:
        return ImageStatus(task_id, pinned_ref, MISSING, (), f"pull failed: {exc}")
    return local_status(client, task_id, image, pinned_ref)


def registry_status(task_id: str, image: str, pinned_ref: str, timeout: float = 20) -> ImageStatus:
    """Ask the image's registry for the manifest digest of its tag, without pulling anything."""
    registry, path, tag = split_reference(image)
    digest = pinned_ref.split("@", 1)[1]
    try:
        found = manifest_digest(registry, path, tag, timeout)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return ImageStatus(task_id, pinned_ref, UNREACHABLE, (), f"registry {registry} did not answer: {exc}")
    if found is None:
        return ImageStatus(task_id, pinned_ref, MISSING, (), f"{registry} has no {path}:{tag}")
    state = MATCH if found == digest else MISMATCH
    detail = "" if state == MATCH else f"the tag {tag} now points to another manifest; the pinned digest is still used"
    return ImageStatus(task_id, pinned_ref, state, (found,), detail)


def manifest_digest(registry: str, path: str, tag: str, timeout: float) -> str | None:
    """The `Docker-Content-Digest` of `path:tag`, or None when the registry has no such manifest."""
    host = "registry-1.docker.io" if registry == "docker.io" else registry
    scheme = "http" if host.startswith(("127.", "localhost")) else "https"
    url = f"{scheme}://{host}/v2/{path}/manifests/{tag}"
    headers = {"Accept": MANIFEST_TYPES}
    for _ in range(2):  # a second try with a bearer token if the registry asks for one
        request = urllib.request.Request(url, headers=headers, method="HEAD")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.headers.get("Docker-Content-Digest")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            challenge = exc.headers.get("WWW-Authenticate", "")
            if exc.code != 401 or not challenge.startswith("Bearer "):
                raise
            headers["Authorization"] = f"Bearer {_anonymous_token(challenge, timeout)}"
    raise ValueError(f"{url}: the registry refused the anonymous token")


def _anonymous_token(challenge: str, timeout: float) -> str:
    fields = dict(part.split("=", 1) for part in challenge[len("Bearer "):].split(","))
    fields = {k.strip(): v.strip().strip('"') for k, v in fields.items()}
    query = urllib.parse.urlencode({k: v for k, v in fields.items() if k in ("service", "scope")})
    with urllib.request.urlopen(f"{fields['realm']}?{query}", timeout=timeout) as response:
        body = json.loads(response.read())
    return body.get("token") or body["access_token"]
