"""The collector's PostgreSQL database goes away (connections refused, the collector's own
ended) and comes back: while it is gone every answer is a 503 with Retry-After, never a 500
(the agent splits a batch after five 500s and sets its records aside); afterwards the same
batch is stored once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

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
            assert answer.json()["detail"].startswith("database unavailable, nothing stored")
            page = c.client.get("/api/v1/hosts", headers=c.admin)  # any route: 503 too
            assert page.status_code == 503, page.text
        assert counts(c) == (1, 0)
        again = post(c, token, body)
        assert again.status_code == 200, again.text
        assert post(c, token, body).status_code == 200  # a replay: duplicates
        assert counts(c) == (2, 2)
