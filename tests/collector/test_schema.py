"""The schema comes from the migrations, and the models agree with them (no drift)."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from collector import db
from collector.models import Base
from tests.collector.conftest import Collector
from tests.collector.test_ingest import batch, kline, post, sample


def test_migrations_match_models(db_url: str) -> None:
    db.migrate(db_url)
    engine = create_engine(db.normalize_url(db_url))
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == []


def test_migrate_is_idempotent(db_url: str) -> None:
    db.migrate(db_url)
    db.migrate(db_url)


def test_delete_host_removes_its_rows(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    post(collector, token, batch(samples=[sample(1)], lines=[kline(1, 1)]))
    admin = collector.admin
    assert collector.client.delete("/api/v1/hosts/spark-01", headers=admin).status_code == 204
    assert collector.client.get("/api/v1/hosts/spark-01", headers=admin).status_code == 404
    token = collector.add_host("spark-01")
    resp = post(collector, token, batch(samples=[sample(1)], lines=[kline(1, 1)]))
    assert resp.json()["stored"] == {"samples": 1, "lines": 1, "events": 0}
