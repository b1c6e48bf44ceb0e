"""The schema comes from the migrations, and the models agree with them (no drift)."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from collector import db
from collector.models import Base
from collector.vllm.store import vllm_lines
from tests.collector.conftest import Collector
from tests.collector.ingest.test_batch import batch, kline, post, sample


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


def test_vllm_lines_are_read_through_their_partial_index(db_url: str) -> None:
    """During a kernel storm correlation reads vLLM lines by time: the plan must use the
    partial index, not walk every line of the window."""
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    compiled = vllm_lines(1, since=1764400000.0, until=1764400004.0).compile(engine)
    # Bound as the app binds them.
    params: Any = compiled.params
    if compiled.positiontup is not None:
        params = tuple(compiled.params[name] for name in compiled.positiontup)
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SET enable_seqscan = off")  # an empty table: no cost contest
            plan = conn.exec_driver_sql(f"EXPLAIN {compiled}", params).scalars().all()
        else:
            explain = f"EXPLAIN QUERY PLAN {compiled}"
            plan = [row[-1] for row in conn.exec_driver_sql(explain, params)]
    engine.dispose()
    assert any("ix_lines_vllm_host_ts" in step for step in plan), plan
