"""Agent tokens cached per process (ingest.tokens): a token rotated or a host deleted by any
process is refused at once, nothing of the refused batch stored, on SQLite and PostgreSQL."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from collector import db
from collector.auth import hash_token
from collector.hosts import registry
from collector.main import create_app
from collector.models import Line
from tests.collector.conftest import Collector
from tests.collector.ingest.test_batch import batch, kline, post


def cached(collector: Collector, token: str) -> bool:
    tokens = collector.client.app.state.agent_tokens  # type: ignore[attr-defined]
    return tokens.get(hash_token(token)) is not None


def stored_lines(collector: Collector) -> int:
    factory = collector.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.read_scope(factory) as session:
        return int(session.scalar(select(func.count()).select_from(Line)) or 0)


def test_a_token_rotated_by_another_process_is_refused_at_once(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    assert post(collector, token, batch()).status_code == 200
    assert cached(collector, token)
    # `add-host spark-01 --rotate-token` is another process: this one is not told.
    engine = db.make_engine(collector.settings.db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        new = registry.rotate_token(session, host=registry.get_host(session, name="spark-01"))
    engine.dispose()

    refused = post(collector, token, batch(lines=[kline(1, 100)]))
    assert refused.status_code == 401, refused.text
    assert stored_lines(collector) == 0
    assert not cached(collector, token)
    assert post(collector, token, batch()).status_code == 401  # and stays refused
    assert post(collector, new, batch(lines=[kline(1, 100)])).status_code == 200
    assert stored_lines(collector) == 1


def test_a_host_deleted_elsewhere_is_refused_at_once_and_its_name_can_come_back(
    collector: Collector,
) -> None:
    token = collector.add_host("spark-01")
    assert post(collector, token, batch(lines=[kline(1, 100)])).status_code == 200
    # A second collector process on the same database deletes the host.
    with TestClient(create_app(collector.settings)) as other:
        gone = other.delete("/api/v1/hosts/spark-01", headers=collector.admin)
        assert gone.status_code == 204, gone.text
    assert stored_lines(collector) == 0

    refused = post(collector, token, batch(lines=[kline(2, 101)]))
    assert refused.status_code == 401, refused.text
    assert stored_lines(collector) == 0
    assert not cached(collector, token)

    again = collector.add_host("spark-01")  # registered anew: a new token, maybe the same id
    assert post(collector, token, batch()).status_code == 401
    assert post(collector, again, batch(lines=[kline(2, 101)])).status_code == 200
    assert stored_lines(collector) == 1


def test_an_unknown_token_is_not_cached(collector: Collector) -> None:
    collector.add_host("spark-01")
    assert post(collector, "fwh_unknown", batch()).status_code == 401
    assert not cached(collector, "fwh_unknown")
