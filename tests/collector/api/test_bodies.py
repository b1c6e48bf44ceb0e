"""No request body makes a 500: a NUL in any string (PostgreSQL text cannot hold one) or a
non-finite number anywhere in a body is a 422 saying where, on SQLite and PostgreSQL (a matrix
run's host or a webhook URL with a NUL were 500s on PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.collector.conftest import Collector, make_collector

SPEC = {
    "host": "spark-01",
    "launcher": {"type": "command"},
    "base_args": ["v"],
    "profiles": {"A": {}},
}
REFUSED: list[tuple[str, str, Any, str]] = [
    ("POST", "/api/v1/matrix-runs", {"preset": "nemoclaw-spark-qwen", "host": "a\x00"}, "/host"),
    ("POST", "/api/v1/matrix-runs", {"preset": "\x00", "host": "spark-01"}, "/preset"),
    ("POST", "/api/v1/matrix-runs", {"spec": SPEC | {"host": "a\x00"}}, "/spec/host"),
    ("POST", "/api/v1/matrix-runs", {"spec": SPEC | {"base_args": ["v\x00"]}}, "/spec/base_args/0"),
    ("POST", "/api/v1/matrix-runs", '{"spec": {"repeat": 1e400}}', "/spec/repeat"),
    ("POST", "/api/v1/webhooks", {"url": "http://a/\x00"}, "/url"),
    ("POST", "/api/v1/webhooks", {"url": "ntfy://a\x00", "format": "apprise"}, "/url"),
    ("POST", "/api/v1/webhooks", {"url": "http://a/", "events": ["\x00"]}, "/events/0"),
    ("PATCH", "/api/v1/webhooks/1", {"url": "http://b/\x00"}, "/url"),
    ("PATCH", "/api/v1/hosts/spark-01", {"netconsole_from": ["\x00"]}, "/netconsole_from/0"),
    ("POST", "/api/v1/hosts/spark-01/deploy", {"root": "/\x00"}, "/root"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Collector]:
    if request.param == "sqlite":
        url = f"sqlite:///{Path(tmp_path_factory.mktemp('bodies')) / 'fw.db'}"
    else:
        url = request.getfixturevalue("fresh_postgres_url")
    collector = make_collector(url)
    c = next(collector)
    c.add_host("spark-01")
    r = c.client.post("/api/v1/webhooks", json={"url": "http://a/"}, headers=c.admin)
    assert r.status_code == 201 and r.json()["id"] == 1
    yield c
    next(collector, None)


@pytest.mark.parametrize(("method", "path", "body", "where"), REFUSED, ids=lambda v: str(v)[:30])
def test_a_nul_or_non_finite_number_in_a_body_is_a_422_saying_where(
    api: Collector, method: str, path: str, body: Any, where: str
) -> None:
    text = body if isinstance(body, str) else json.dumps(body)
    headers = {**api.admin, "Content-Type": "application/json"}
    r = api.client.request(method, path, content=text, headers=headers)
    assert r.status_code == 422, r.text
    assert f"at {where}" in r.text
    # Nothing was made of it.
    assert api.read("/api/v1/matrix-runs") == []
    assert [t["url"] for t in api.read("/api/v1/webhooks")] == ["http://a/"]
