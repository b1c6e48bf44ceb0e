"""Integration fixtures: a fresh database of each kind for a test's real processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import postgres as pg_support


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file, then a database of its own on the session's PostgreSQL (dropped after)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fw.db'}"
        return
    url = pg_support.fresh_database(request.getfixturevalue("postgres_url"))
    yield url
    pg_support.drop_database(url)
