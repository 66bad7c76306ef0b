"""`asyncodebench.files`: files and folders appear whole or not at all, and nothing temporary is left beside them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from asyncodebench.files import atomic_path, write_atomic


def test_write_atomic_writes_text_and_bytes_creating_the_folder_and_leaving_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.txt"
    write_atomic(target, "caf\udce9\n")  # a lone surrogate is the byte it escapes
    assert target.read_bytes() == b"caf\xe9\n"
    write_atomic(target, b"\x00raw")
    assert target.read_bytes() == b"\x00raw"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]


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
