"""Writing files on a disk that may be full: a temp copy and a rename when the disk has room for
the copy, an overwrite in place of blocks the file already owns when it has not."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PAD_TO = 4096  # small files are padded so that later rewrites fit in the blocks they own


def free_bytes(directory: Path) -> int:
    """Bytes an unprivileged writer may still use on ``directory``'s filesystem."""
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def _fsync_dir(directory: Path) -> None:
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_atomic(path: Path, data: bytes) -> None:
    """temp + fsync + rename + fsync(dir): after a crash the file is old or new, never torn."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            if os.write(fd, data) != len(data):
                raise OSError(28, "short write")  # ENOSPC
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


def overwrite(path: Path, chunks: list[bytes]) -> None:
    """Write ``chunks`` back to back from the start of ``path``, then cut it there (no block
    is allocated while the data is no longer than the file). Each chunk is one write, so a
    ``kill -9`` leaves every chunk either old or new; a power loss may tear one."""
    fd = os.open(path, os.O_WRONLY)
    try:
        offset = 0
        for chunk in chunks:
            os.pwrite(fd, chunk, offset)
            offset += len(chunk)
        os.ftruncate(fd, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def replace(old: Path, new: Path, chunks: list[bytes], *, room: int) -> None:
    """``new`` holds ``chunks`` in place of ``old``: through a temp copy if ``room`` bytes are
    free for it, else overwritten in place (the caller guarantees no chunk lands past where
    its own bytes were) and renamed."""
    if room >= sum(len(c) for c in chunks):
        tmp = new.with_suffix(".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(b"".join(chunks))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, new)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
        else:
            if old != new:
                old.unlink(missing_ok=True)
            return
    overwrite(old, chunks)
    if old != new:
        os.replace(old, new)


def save_small(path: Path, data: bytes) -> None:
    """A small file (state) saved atomically, padded to ``PAD_TO`` bytes (with spaces: JSON
    ignores them); on a full disk the padded file is overwritten in place instead."""
    padded = data + b" " * max(0, PAD_TO - len(data))
    try:
        write_atomic(path, padded)
    except OSError:
        if not path.exists() or path.stat().st_size < len(padded):
            raise
        overwrite(path, [padded + b" " * (path.stat().st_size - len(padded))])
