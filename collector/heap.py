"""The C heap of a long-running collector (glibc): what ingest frees goes back to the system.

Measured with 21 agents (``bench/memory.py``): the Python objects stayed flat while glibc's
heap kept growing, with more free memory in it than used: each worker thread gets its own
malloc arena, and batch-sized buffers (request bodies, JSON) land there, so freed memory stays
scattered over a dozen arenas. Fewer arenas, big blocks from ``mmap`` (returned on free) and a
periodic ``malloc_trim`` keep the resident size at what is in use. Elsewhere (musl, macOS)
these are no-ops.
"""

from __future__ import annotations

import ctypes
import functools
import logging

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 2
MMAP_THRESHOLD = 256 * 1024  # fixed: glibc's own threshold climbs to 32 MiB after big frees
TRIM_INTERVAL_S = 60.0


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The process's own C library, if it is glibc (the symbols of dlopen(NULL))."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def tune() -> bool:
    """Cap the arenas and mmap big blocks (call once, early); False where there is no glibc."""
    libc = _libc()
    if libc is None:
        return False
    ok = libc.mallopt(M_ARENA_MAX, ARENAS) == 1 and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    if not ok:
        log.info("malloc tuning not applied")
    return bool(ok)


def trim() -> bool:
    """Give the heap's free pages back to the system; True if any were."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))
