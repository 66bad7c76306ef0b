"""The kit's setup (docs/quickstart.md) on a stock Debian 12: its Python refuses system installs (PEP 668), and
scripts/install_python_env.sh still makes a working <repo>/.venv from the repository's committed files.

The machine is a container of a bookworm root filesystem made with mmdebstrap from this machine's apt sources (cached
under ~/.cache/asyncodebench/, keyed by the package list) and `docker import`ed. It gets `git archive HEAD`, what a
clone has; the host's network, to reach PyPI; and the host's CA bundle, read-only, which any machine on a network that
inspects TLS needs too (it installs no package; without it pip cannot verify PyPI on such a network). Only the Python
part of the setup runs there: the rest installs Debian packages on the machine it runs on and starts dockerd, which a
container cannot host. Takes two to four minutes the first time (a minute for the rootfs, then the wheels'
downloads); later runs reuse the rootfs and pip's download cache, and install into a new virtual environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from asyncodebench.files import atomic_path
from asyncodebench.images.toolkit import HOST_APT_SOURCES, cache_dir

pytestmark = [pytest.mark.fresh_debian, pytest.mark.docker]

ROOT = Path(__file__).resolve().parent.parent
SUITE = "bookworm"
VARIANT = "apt"
PACKAGES = ("python3", "python3-pip", "python3-venv", "git")  # what a stock Debian 12 with Python has, pip included
KEY = hashlib.sha256(json.dumps([SUITE, VARIANT, PACKAGES]).encode()).hexdigest()[:16]
IMAGE = f"asyncodebench/fresh-debian:{SUITE}-{KEY}"
CHECKOUT = "/root/AsynCodeBench"
IMPORTS = "import asyncodebench, datasets, docker, jsonschema, pyarrow, olah"
LABEL = "org.asyncodebench.test=fresh_debian"  # not the run-id label: the harness's own tests count those
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")  # Debian's bundle; pip in the venv reads this path


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def require(tool: str, package: str) -> None:
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is not installed; this test needs it: apt-get install -y {package}", pytrace=False)


def run(cmd: list[str], timeout: float, what: str, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, timeout=timeout, **kwargs)
    if done.returncode != 0:
        err = done.stderr if isinstance(done.stderr, str) else done.stderr.decode(errors="replace")
        pytest.fail(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n{tail(err)}", pytrace=False)
    return done


def stock_rootfs() -> Path:
    """The bookworm rootfs tarball, made with mmdebstrap on first use (about a minute)."""
    tarball = cache_dir() / f"fresh-debian-{SUITE}-{KEY}.tar"
    if tarball.is_file():
        return tarball
    with atomic_path(tarball) as partial:
        cmd = ["mmdebstrap", "--format=tar", f"--variant={VARIANT}", "--include=" + ",".join(PACKAGES), SUITE,
               str(partial)]
        if HOST_APT_SOURCES.is_file():
            cmd.append(str(HOST_APT_SOURCES))  # this machine's mirror, as the demo image uses
        run(cmd, 900, "mmdebstrap (needs root and this machine's Debian mirror)", stdin=subprocess.DEVNULL)
    return tarball


@pytest.fixture(scope="module")
def stock_image(services: None) -> str:
    """The rootfs as a Docker image, imported once per package list."""
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        run(["docker", "import", str(stock_rootfs()), IMAGE], 600, "docker import of the bookworm rootfs")
    return IMAGE


@pytest.fixture(scope="module")
def container(stock_image: str) -> Iterator[str]:
    """A running stock container holding the committed files at /root/AsynCodeBench; always removed afterwards."""
    name = f"asyncodebench-fresh-debian-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    mounts: list[str] = []
    if HOST_CA_BUNDLE.is_file():
        mounts += ["-v", f"{HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro"]  # this machine's trust, as its apt sources above
    # pip's download cache survives between runs (pip still asks the index for every version): the install is
    # checked afresh without fetching the same wheels every time.
    pip_cache = cache_dir() / "fresh-debian-pip-cache"
    pip_cache.mkdir(parents=True, exist_ok=True)
    mounts += ["-v", f"{pip_cache}:/root/.cache/pip"]
    try:
        run(["docker", "run", "-d", "--name", name, "--label", LABEL, "--network", "host", *mounts, stock_image,
             "sleep", "infinity"], 120, "docker run")
        archive = run(["git", "archive", "--format=tar", "HEAD"], 120, "git archive HEAD", cwd=ROOT).stdout
        run(["docker", "exec", "-i", name, "sh", "-c", f"mkdir -p {CHECKOUT} && tar -x -C {CHECKOUT}"], 120,
            "copying the committed files into the container", input=archive)
        yield name
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, timeout=120)


def in_container(name: str, command: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "exec", "-w", CHECKOUT, name, "bash", "-c", command], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(container: str) -> subprocess.CompletedProcess:
    """scripts/install_python_env.sh, run once in the stock container (the later tests need it to have passed)."""
    return in_container(container, "bash scripts/install_python_env.sh", timeout=900)


@pytest.fixture(scope="session", autouse=True)  # session: before `services`, which would start dockerd
def tools() -> None:
    """Fail, never skip, when this machine lacks what the test needs."""
    require("mmdebstrap", "mmdebstrap")
    require("docker", "docker.io")
    require("git", "git")


def test_the_stock_python_refuses_a_system_pip_install(container: str) -> None:
    done = in_container(container, "python3 -m pip install jsonschema")
    assert done.returncode != 0, done.stdout
    assert "externally-managed-environment" in done.stdout + done.stderr, done.stdout + done.stderr
    assert in_container(container, "test ! -e .venv").returncode == 0, "the copied files already hold a .venv"


def test_install_python_env_succeeds_on_the_committed_files(installed: subprocess.CompletedProcess) -> None:
    assert installed.returncode == 0, (f"scripts/install_python_env.sh failed (exit {installed.returncode}):"
                                       f"\n{tail(installed.stdout)}\n{tail(installed.stderr)}")


def test_the_venv_imports_what_the_kit_needs(container: str, installed: subprocess.CompletedProcess) -> None:
    assert installed.returncode == 0, "scripts/install_python_env.sh failed; see the test above"
    done = in_container(container, f'.venv/bin/python -c "{IMPORTS}"')
    assert done.returncode == 0, done.stderr


def test_the_builder_check_passes_in_the_venv(container: str, installed: subprocess.CompletedProcess) -> None:
    assert installed.returncode == 0, "scripts/install_python_env.sh failed; see the test above"
    done = in_container(container, ".venv/bin/python AsynCodeBench.py --check")
    assert done.returncode == 0, f"{done.stdout}\n{tail(done.stderr)}"
    assert "up to date" in done.stdout


def test_a_second_run_reuses_the_venv(container: str, installed: subprocess.CompletedProcess) -> None:
    assert installed.returncode == 0, "scripts/install_python_env.sh failed; see the test above"
    assert in_container(container, "touch .venv/kept-by-the-second-run").returncode == 0
    done = in_container(container, "bash scripts/install_python_env.sh")
    assert done.returncode == 0, done.stderr
    assert in_container(container, "test -e .venv/kept-by-the-second-run").returncode == 0, "the venv was recreated"
