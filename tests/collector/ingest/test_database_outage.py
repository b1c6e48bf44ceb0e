"""The collector's PostgreSQL database goes away (connections refused, the collector's own
ended) and comes back: while it is gone every answer is a 503 with Retry-After, never a 500
(the agent splits a batch after five 500s and sets its records aside); afterwards the same
batch is stored once."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from collector.models import Line, Sample
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import factory
from tests.collector.ingest.test_batch import batch, kline, post, sample
from tests.support import postgres as pg_support

_collector = contextmanager(make_collector)


@contextmanager
def database_gone(url: str) -> Iterator[None]:
    """The database refuses connections and every open one is ended (a server restart, seen
    from this database's side), until the block ends."""
    name = make_url(url).database
    admin = make_url(url).set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(**pg_support.conninfo(admin), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )
        try:
            yield
        finally:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


def counts(c: Collector) -> tuple[int, int]:
    with factory(c)() as s:
        return s.scalar(select(func.count()).select_from(Sample)) or 0, s.scalar(
            select(func.count()).select_from(Line)
        ) or 0


def test_a_batch_sent_while_the_database_is_gone_is_a_503_then_stored_once(
    fresh_postgres_url: str,
) -> None:
    with _collector(fresh_postgres_url) as c:
        token = c.add_host("spark-01")
        assert post(c, token, batch(samples=[sample(1)])).status_code == 200
        body = batch(samples=[sample(2)], lines=[kline(1, 100), kline(2, 101)])
        with database_gone(fresh_postgres_url):
            answer = post(c, token, body)
            assert answer.status_code == 503, answer.text
            assert answer.headers["Retry-After"] == "1"
            # the driver's words (they can name the database's host) stay in the log
            assert answer.json()["detail"] == "database unavailable, nothing stored; send it again"
            page = c.client.get("/api/v1/hosts", headers=c.admin)  # any route: 503 too
            assert page.status_code == 503, page.text
        assert counts(c) == (1, 0)
        again = post(c, token, body)
        assert again.status_code == 200, again.text
        assert post(c, token, body).status_code == 200  # a replay: duplicates
        assert counts(c) == (2, 2)


def _refused_again(kind: str) -> OperationalError:
    """A database error the same batch meets every time, as each driver raises it: SQLite's
    SQL error (a real one: the statement names no table there is), PostgreSQL's program limit
    (class 54: a value past an index row's size, too many columns or arguments)."""
    if kind == "sqlite":
        try:
            sqlite3.connect(":memory:").execute("SELECT * FROM no_such_table")
        except sqlite3.OperationalError as exc:
            return OperationalError("SELECT * FROM no_such_table", {}, exc)
        raise AssertionError("unreachable")
    limit = psycopg.errors.ProgramLimitExceeded("index row size 3056 exceeds maximum 2712")
    return OperationalError("INSERT INTO lines ...", {}, limit)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_database_error_the_batch_meets_again_is_a_500_it_gets_split_on(
    collector: Collector, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A 503 is never split (the agent waits it out): an error the same records meet on every
    try answered 503 would hold the host's spool behind that batch for good. A 500, after
    which the agent splits the batch and sets the one bad record aside."""
    token = collector.add_host("spark-01")

    def refuse(*_args: object, **_kw: object) -> None:
        raise _refused_again(kind)

    monkeypatch.setattr("collector.api.ingest.ingest_batch", refuse)
    answer = post(collector, token, batch(samples=[sample(1)]))
    assert answer.status_code == 500, answer.text
    assert "Retry-After" not in answer.headers
