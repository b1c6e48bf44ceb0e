"""A small real tmpfs, for running out of disk for real: ``mount -t tmpfs -o size=...``.

Needs root (or CAP_SYS_ADMIN); ``available()`` says whether this machine allows it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _mount(path: Path, size: str) -> bool:
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        timeout=10,
        check=False,
    )
    return result.returncode == 0


def available() -> bool:
    if os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory(prefix="fw-tmpfs-probe-") as probe:
        if not _mount(Path(probe), "64k"):
            return False
        subprocess.run(["umount", probe], capture_output=True, timeout=10, check=False)
    return True


@contextlib.contextmanager
def small_tmpfs(size: str) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` (e.g. ``"2m"``) mounted on a temp dir, unmounted after."""
    with tempfile.TemporaryDirectory(prefix="fw-tmpfs-") as mountpoint:
        path = Path(mountpoint)
        if not _mount(path, size):
            raise RuntimeError(f"cannot mount a tmpfs on {path}")
        try:
            yield path
        finally:
            umount = ["umount", "-l", str(path)]
            subprocess.run(umount, capture_output=True, timeout=10, check=False)


def fill(path: Path) -> Path:
    """Fill the filesystem of ``path`` to the last byte with one file; returns it."""
    filler = path / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (b"\0" * 4096, b"\0"):
            with contextlib.suppress(OSError):
                while f.write(chunk):
                    pass
    return filler
