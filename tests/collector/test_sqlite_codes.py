"""SQLite's errors read the same on Python 3.10 (the message only) as on 3.11 (its code): real
errors from sqlite3 are compared with copies that carry only their message, as 3.10 raises
them. A 3.10 collector answered a statement that fails every time (no such table) with a 503,
so an agent would have waited on that batch for good."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from collector.errors import transient
from collector.sqlite_codes import SQLITE_BUSY, SQLITE_ERROR, primary_code


def _no_table(_tmp: Path) -> None:
    sqlite3.connect(":memory:").execute("SELECT * FROM no_such_table")


def _syntax(_tmp: Path) -> None:
    sqlite3.connect(":memory:").execute("SELEC 1")


def _locked(tmp: Path) -> None:
    holder = sqlite3.connect(tmp / "fw.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    sqlite3.connect(tmp / "fw.db", timeout=0).execute("SELECT * FROM sqlite_master")


def _readonly(tmp: Path) -> None:
    sqlite3.connect(tmp / "fw.db").execute("CREATE TABLE t (x)")
    ro = sqlite3.connect(f"file:{tmp / 'fw.db'}?mode=ro", uri=True)
    ro.execute("INSERT INTO t VALUES (1)")


def _cannot_open(tmp: Path) -> None:
    sqlite3.connect(tmp / "no-such-dir" / "fw.db")


def _not_a_database(tmp: Path) -> None:
    (tmp / "fw.db").write_bytes(b"not a database, a text file " * 100)
    sqlite3.connect(tmp / "fw.db").execute("SELECT * FROM sqlite_master")


CASES: list[tuple[Callable[[Path], None], int, bool]] = [
    (_no_table, SQLITE_ERROR, False),
    (_syntax, SQLITE_ERROR, False),
    (_locked, SQLITE_BUSY, True),
    (_readonly, 8, True),
    (_cannot_open, 14, True),
    (_not_a_database, 26, True),
]


@pytest.mark.parametrize(
    ("fail", "code", "is_transient"), CASES, ids=lambda c: getattr(c, "__name__", None)
)
def test_a_real_error_and_its_message_alone_read_the_same(
    tmp_path: Path, fail: Callable[[Path], None], code: int, is_transient: bool
) -> None:
    with pytest.raises(sqlite3.Error) as raised:
        fail(tmp_path)
    real = raised.value
    as_on_310 = type(real)(*real.args)  # no sqlite_errorcode
    assert getattr(as_on_310, "sqlite_errorcode", None) is None
    assert primary_code(as_on_310) == code, str(real)
    if hasattr(real, "sqlite_errorcode"):  # Python 3.11 and later
        assert primary_code(real) == code
    for exc in (real, as_on_310):
        assert transient(OperationalError("SELECT ...", {}, exc)) is is_transient


def test_what_is_no_sqlite3_error_has_no_code() -> None:
    assert primary_code(ValueError("database is locked")) is None
    assert transient(OperationalError("SELECT 1", {}, ConnectionRefusedError())) is True
