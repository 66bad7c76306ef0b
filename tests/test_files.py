"""`asyncodebench.files`: files and folders appear whole or not at all, and nothing temporary is left beside them."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from asyncodebench.files import atomic_path, write_atomic


def test_write_atomic_writes_text_and_bytes_creating_the_folder_and_leaving_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.txt"
    write_atomic(target, "caf\udce9\n")  # a lone surrogate is the byte it escapes
    assert target.read_bytes() == b"caf\xe9\n"
    write_atomic(target, b"\x00raw")
    assert target.read_bytes() == b"\x00raw"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_write_atomic_gives_the_mode_the_umask_gives_a_plain_open(tmp_path: Path, umask: int) -> None:
    # In a child process: the umask is process-wide, and pytest's own threads write files too.
    code = ("import os, sys; from pathlib import Path; from asyncodebench.files import write_atomic; "
            f"os.umask({umask}); write_atomic(Path(sys.argv[1]) / 'new.json', '{{}}'); "
            "Path(sys.argv[1], 'plain.json').write_text('{}')")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    mode = stat.S_IMODE((tmp_path / "new.json").stat().st_mode)
    assert mode == 0o666 & ~umask == stat.S_IMODE((tmp_path / "plain.json").stat().st_mode)


def test_write_atomic_that_fails_keeps_the_old_file_and_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("old")
    with pytest.raises(TypeError):
        write_atomic(target, 12345)  # type: ignore[arg-type]  # not bytes: the write fails after mkstemp
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_atomic_path_renames_a_file_or_a_folder_into_place(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "rootfs.tar"
    with atomic_path(target) as partial:
        assert not partial.exists() and partial.parent.parent == target.parent and partial.name == target.name
        partial.write_bytes(b"tarball")
        assert not target.exists()  # nothing at the target until the block ends
    assert target.read_bytes() == b"tarball"
    folder = tmp_path / "repos" / "x.git"
    with atomic_path(folder) as partial:
        (partial / "objects").mkdir(parents=True)
    assert (folder / "objects").is_dir()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["cache", "objects", "repos", "rootfs.tar", "x.git"]


def test_atomic_path_that_fails_removes_the_partial_work_and_keeps_the_old_target(tmp_path: Path) -> None:
    target = tmp_path / "map.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as partial:
        partial.write_text("half")
        raise RuntimeError("the tool failed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["map.json"]
    with atomic_path(target) as partial:
        partial.write_text("new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
