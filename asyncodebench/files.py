"""Files and folders that appear whole or not at all: made under a temporary name beside their place, then renamed
into it (a rename within one folder is atomic), so a reader, a resumed run or a second process never sees half of
one. The one implementation every layer uses; it imports nothing of the package.

(Code that runs inside task containers, `harness/incontainer/` and the sandbox's init script, cannot import the
package and keeps its own rename.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write `data` (text as UTF-8, lone surrogates as the bytes they escape) to `path`, creating its folder: via a
    temporary file, flushed to disk, then a rename. The file gets the mode a plain `open` would give it (0666 less
    the umask), not `tempfile.mkstemp`'s 0600, so a shared run folder stays readable as its owner set it up."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8", errors="surrogateescape") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask. Linux shows it in /proc; elsewhere it can only be read by setting it, which for an
    instant would give other threads' new files another mode, so a lock keeps this module's own writes apart."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


_UMASK_LOCK = threading.Lock()


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A path at which the block makes the file or folder `path`: renamed to `path` when the block ends without an
    exception, else removed.

    `with atomic_path(target) as partial:` the block makes `partial` (it does not exist yet; a tool may write it).
    `partial` lies in a private temporary folder beside `target` (creating `target`'s folder), which is removed in
    both cases. Renaming a folder onto an existing non-empty folder fails (OSError), as `os.replace` does.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part"))
    try:
        partial = scratch / path.name
        yield partial
        os.replace(partial, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
