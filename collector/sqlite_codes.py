"""SQLite's result codes from ``sqlite3``'s errors, on Python 3.10 as on 3.11: whether an error
says "busy", "not now" or "this statement will fail again" decides a 503, a wait or a 500."""

from __future__ import annotations

import sqlite3

SQLITE_ERROR = 1  # sqlite3.SQLITE_ERROR from Python 3.11 on: an SQL error or missing database
SQLITE_BUSY = 5
# sqlite3_errstr's words for the other primary codes a store in trouble meets (locked, out of
# memory, read-only, interrupted, disk I/O, corrupt, full, cannot open, locking protocol,
# schema changed, not a database): Python 3.10 gives only the message.
ERRSTR_CODES = {
    "database is locked": SQLITE_BUSY,
    "database table is locked": 6,
    "out of memory": 7,
    "attempt to write a readonly database": 8,
    "interrupted": 9,
    "disk I/O error": 10,
    "database disk image is malformed": 11,
    "database or disk is full": 13,
    "unable to open database file": 14,
    "locking protocol": 15,
    "database schema has changed": 17,
    "file is not a database": 26,
}


def primary_code(exc: BaseException | None) -> int | None:
    """SQLite's primary result code of a ``sqlite3`` error (None for anything else).
    Python 3.11 gives the extended code, the primary in its low byte; 3.10 only the message:
    sqlite3_errstr's words for a code above, else SQLITE_ERROR's own words (no such table, too
    many SQL variables, a syntax error)."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF
    message = str(exc)
    return next((c for words, c in ERRSTR_CODES.items() if message.startswith(words)), SQLITE_ERROR)
