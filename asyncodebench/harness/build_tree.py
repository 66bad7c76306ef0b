"""Each evaluated state's own native build tree: copy-on-write over the image's, read-only once built.

A task's configured build tree (gigabytes for TVM) is copied once per run, with the rest of the image's work tree,
into the run's base volume on disk (`sandbox.base_volume`), and handed to the sandbox user there. Each state gets an
overlay of it, made by the daemon (local volume driver, so no container needs privileges): the base tree is the
read-only lower layer, and everything the state's build writes goes to the upper layer, a size-bounded tmpfs. A
state's tree so costs no copy; only what its build changes is held, in memory charged to the build's container and
bounded by `Limits.build_space`. A holder container keeps that tmpfs mounted while the state's containers use it.
"""

from __future__ import annotations

import uuid
from typing import Any

from asyncodebench.harness.sandbox import LABEL_RUN, SANDBOX_GID, SANDBOX_UID, SandboxUnavailableError, run_labels

UPPER_MOUNT = "/state"  # where the holder sees the tmpfs holding the upper layer


class NoBuildTreeError(SandboxUnavailableError):
    """The image has no configured build tree where the task's build step needs one: the image is at fault."""


def check_base_build_tree(client: Any, image_ref: str, run_id: str, base: str, workdir: str, build_dir: str,
                          command: tuple[str, ...]) -> None:
    """Check the run's base volume holds the image's build tree, and give that tree to the sandbox user (the
    states' builds run as that user on top of it). Run once, when the base volume is made.

    Raises:
        NoBuildTreeError: the folder is missing or empty: the build step cannot run on this image.
        SandboxUnavailableError: the daemon failed.
    """
    script = (f'[ -d "{build_dir}" ] && [ -n "$(ls -A "{build_dir}")" ] || exit 3; '
              f'chown -R {SANDBOX_UID}:{SANDBOX_GID} "{build_dir}"')
    try:
        container = client.containers.run(image_ref, ["sh", "-c", script], detach=True, network_mode="none",
                                          entrypoint=[], user="0", working_dir=workdir,
                                          volumes={base: {"bind": workdir, "mode": "rw"}}, labels=run_labels(run_id))
        try:
            code = container.wait(timeout=3600)["StatusCode"]
            output = container.logs()[-2000:].decode("utf-8", "replace")
        finally:
            container.remove(force=True)
    except Exception as exc:
        raise SandboxUnavailableError(f"could not check the build tree of {image_ref}: {exc}") from exc
    if code == 3:
        raise NoBuildTreeError(
            f"the image {image_ref} has no build tree at {workdir}/{build_dir}: the task's build step "
            f"(`{' '.join(command)}`, run before every evaluated state) builds on the image's configured tree, so "
            f"without it no state can be graded; run the task's official image, or rebuild one with its build tree")
    if code != 0:
        raise SandboxUnavailableError(f"could not hand the build tree of {image_ref} to the sandbox user "
                                      f"(exit {code}): {output}")


class StateBuildTree:
    """One state's copy-on-write build tree: use `volume` as a mount, inside `with`; everything is removed after."""

    def __init__(self, client: Any, image_ref: str, run_id: str, base: str, build_dir: str, size: str) -> None:
        self.client, self.image_ref, self.run_id = client, image_ref, run_id
        self.lower = f"{_mountpoint(client, base)}/{build_dir}"
        self.size = size
        key = uuid.uuid4().hex[:10]
        self.upper_name, self.volume = f"asyncodebench-upper-{key}", f"asyncodebench-build-{key}"
        self.holder: Any = None

    def __enter__(self) -> StateBuildTree:
        try:
            self._make()
        except Exception as exc:
            self.remove()
            raise SandboxUnavailableError(f"could not make a build tree over {self.lower}: {exc}") from exc
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _make(self) -> None:
        labels = {LABEL_RUN: self.run_id}
        self.client.volumes.create(self.upper_name, driver="local", labels=labels, driver_opts={
            "type": "tmpfs", "device": "tmpfs", "o": f"size={self.size},mode=0755"})
        # The holder keeps the tmpfs mounted (a tmpfs volume lives only while mounted) and makes the overlay's folders.
        self.holder = self.client.containers.run(
            self.image_ref, ["sleep", "infinity"], detach=True, network_mode="none", entrypoint=[], user="0",
            read_only=True, mem_limit="64m", pids_limit=16, labels=run_labels(self.run_id),
            name=f"{self.volume}-holder", volumes={self.upper_name: {"bind": UPPER_MOUNT, "mode": "rw"}})
        made = self.holder.exec_run(["sh", "-c", f"mkdir {UPPER_MOUNT}/upper {UPPER_MOUNT}/work && "
                                                 f"chown {SANDBOX_UID}:{SANDBOX_GID} {UPPER_MOUNT}/upper"], user="0")
        if made.exit_code != 0:
            raise SandboxUnavailableError(f"the build tree's holder could not make its folders: {made.output!r}")
        upper = _mountpoint(self.client, self.upper_name)
        self.client.volumes.create(self.volume, driver="local", labels=labels, driver_opts={
            "type": "overlay", "device": "overlay",
            "o": f"lowerdir={self.lower},upperdir={upper}/upper,workdir={upper}/work"})

    def remove(self) -> None:
        """Remove the overlay, the holder and the tmpfs (each may already be gone)."""
        for step in (lambda: self.client.volumes.get(self.volume).remove(force=True),
                     lambda: self.holder.remove(force=True) if self.holder is not None else None,
                     lambda: self.client.volumes.get(self.upper_name).remove(force=True)):
            try:
                step()
            except Exception:  # gone already, or the daemon died: the run's cleanup removes what is left
                pass


def _mountpoint(client: Any, volume: str) -> str:
    """Where the daemon keeps a volume on its host (the overlay's layers are named by these paths)."""
    return str(client.volumes.get(volume).attrs["Mountpoint"])
