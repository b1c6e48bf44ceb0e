"""Collector fixtures: an app on a fresh database (SQLite, and a real PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from collector import db
from collector.hosts import registry as hosts
from collector.main import create_app
from collector.settings import Settings

ADMIN_TOKEN = "fwa_test-admin-token-NfiglJ5m7yyPhcothuTUjVBIPrDKjawz"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fw.db'}"
    from tests.support.postgres import fresh_database

    return fresh_database(request.getfixturevalue("postgres_url"))


@pytest.fixture
def factory(db_url: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on a migrated fresh database, no app (for what runs below the API)."""
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    yield db.make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fw.db'}"


@dataclass
class Collector:
    client: TestClient
    settings: Settings

    def add_host(self, name: str) -> str:
        factory = self.client.app.state.sessionmaker  # type: ignore[attr-defined]
        with db.session_scope(factory) as session:
            _host, token = hosts.create_host(session, name=name)
        return token

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def read(self, path: str, **params: Any) -> Any:
        """GET ``path`` as the admin; the JSON of a 200 (anything else fails the test)."""
        resp = self.client.get(path, params=params, headers=self.admin)
        assert resp.status_code == 200, resp.text
        return resp.json()


def make_collector(url: str, **overrides: object) -> Iterator[Collector]:
    settings = Settings(db_url=url, admin_token=ADMIN_TOKEN, run_scheduler=False, **overrides)
    with TestClient(create_app(settings)) as client:
        yield Collector(client=client, settings=settings)


@pytest.fixture
def collector(db_url: str) -> Iterator[Collector]:
    yield from make_collector(db_url)


@pytest.fixture
def sqlite_collector(sqlite_url: str) -> Iterator[Collector]:
    yield from make_collector(sqlite_url)
