"""Every read route range-checks its query and path parameters: a value no column or clock
can hold (non-finite or out-of-range times, ids beyond their 32-bit columns, a bad cursor,
NUL in a text filter, a limit outside 1..MAX_LIMIT) is a 400 naming the parameter, on SQLite
and PostgreSQL, where it used to be a 500 (or, for ``limit=-1`` on SQLite, every row)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.readback.series import MAX_LIMIT
from tests.collector.conftest import Collector, make_collector

HOST = "/api/v1/hosts/spark-01"
BIG = str(2**64)
# (method, path, query, the parameter the 400 must name)
REFUSED: list[tuple[str, str, dict[str, Any], str]] = [
    *[
        ("GET", f"{HOST}/{route}", {"limit": limit}, "limit")
        for route in ("samples", "lines", "events", "occurrences")
        for limit in (0, -1, MAX_LIMIT + 1)
    ],
    ("GET", "/api/v1/incidents", {"limit": -1}, "limit"),
    ("GET", "/api/v1/matrix-runs", {"limit": 0}, "limit"),
    *[
        ("GET", f"{HOST}/{route}", {name: value}, name)
        for route in ("samples", "lines", "events", "guard", "timeline")
        for name in ("since", "until")
        for value in ("nan", "inf", "-inf", "1e400", "-1", "1e300")
    ],
    ("GET", f"{HOST}/occurrences", {"since": "nan"}, "since"),
    ("GET", "/api/v1/incidents", {"since": "1e400"}, "since"),
    ("GET", "/api/v1/incidents", {"until": "nan"}, "until"),
    ("GET", f"{HOST}/samples", {"step": 0}, "step"),
    ("GET", f"{HOST}/samples", {"step": BIG}, "step"),
    ("GET", f"{HOST}/timeline", {"step": -5}, "step"),
    ("GET", f"{HOST}/lines", {"cursor": "1e400:5"}, "cursor"),
    ("GET", f"{HOST}/lines", {"cursor": f"1.5:{BIG}"}, "cursor"),
    ("GET", f"{HOST}/lines", {"cursor": "nan:1"}, "cursor"),
    ("GET", f"{HOST}/lines", {"cursor": "garbage"}, "cursor"),
    ("GET", f"{HOST}/lines", {"min_priority": 8}, "min_priority"),
    ("GET", f"{HOST}/lines", {"q": "tool\x00call"}, "q"),
    ("GET", f"{HOST}/lines", {"source": "kmsg\x00"}, "source"),
    ("GET", f"{HOST}/events", {"kind": "xid\x00"}, "kind"),
    ("GET", "/api/v1/incidents", {"host": "spark\x00"}, "host"),
    ("GET", "/api/v1/incidents", {"kind": "\x00"}, "kind"),
    ("GET", "/api/v1/hosts/spark%0001", {}, "name"),
    ("GET", "/api/v1/hosts/spark%2001/lines", {}, "name"),
    ("GET", f"/api/v1/incidents/{BIG}", {}, "incident_id"),
    ("GET", "/api/v1/incidents/-1", {}, "incident_id"),
    ("GET", "/api/v1/incidents/1/artifacts/a%00b", {}, "name"),
    ("GET", f"/api/v1/matrix-runs/{BIG}", {}, "run_id"),
    ("POST", f"/api/v1/matrix-runs/{BIG}/cancel", {}, "run_id"),
    ("GET", f"/api/v1/matrix-runs/{BIG}/report.md", {}, "run_id"),
    ("GET", f"/api/v1/webhooks/{BIG}", {}, "target_id"),
    ("DELETE", f"/api/v1/webhooks/{2**31}", {}, "target_id"),
    ("GET", f"/api/v1/incidents/{2**31}", {}, "incident_id"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def reader(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Collector]:
    """One collector per database for the module (the cases only read)."""
    if request.param == "sqlite":
        url = f"sqlite:///{Path(tmp_path_factory.mktemp('params')) / 'fw.db'}"
    else:
        url = request.getfixturevalue("fresh_postgres_url")
    collector = make_collector(url)
    c = next(collector)
    c.add_host("spark-01")
    yield c
    next(collector, None)


@pytest.mark.parametrize(("method", "path", "query", "name"), REFUSED, ids=lambda v: str(v)[:40])
def test_a_parameter_out_of_range_is_a_400_naming_it(
    reader: Collector, method: str, path: str, query: dict[str, Any], name: str
) -> None:
    r = reader.client.request(method, path, params=query, headers=reader.admin)
    assert r.status_code == 400, r.text
    body = r.json()
    assert f"parameter {name}:" in body["detail"], body
    assert [e["loc"][-1] for e in body["errors"]] == [name]


@pytest.mark.parametrize(
    ("path", "query"),
    [
        (f"{HOST}/{route}", {"limit": MAX_LIMIT, "since": 0, "until": 253_402_300_799})
        for route in ("samples", "lines", "events")
    ]
    + [
        (f"{HOST}/occurrences", {"limit": 1, "since": 1.5}),
        (
            f"{HOST}/lines",
            {"cursor": "1715000000.25:12", "q": "Xid 79 'quoted' %_", "order": "desc"},
        ),
        (f"{HOST}/samples", {"step": 366 * 86400, "since": 0, "until": 1e9}),
        (f"{HOST}/guard", {"since": 0}),
        ("/api/v1/incidents", {"host": "spark-01", "kind": "unreachable", "limit": MAX_LIMIT}),
        ("/api/v1/matrix-runs", {"limit": MAX_LIMIT}),
    ],
    ids=lambda v: str(v)[:40],
)
def test_the_edges_of_each_range_are_accepted(
    reader: Collector, path: str, query: dict[str, Any]
) -> None:
    reader.read(path, **query)


def test_the_largest_id_a_column_holds_is_a_404(reader: Collector) -> None:
    for path in ("/api/v1/incidents", "/api/v1/matrix-runs", "/api/v1/webhooks"):
        r = reader.client.get(f"{path}/{2**31 - 1}", headers=reader.admin)
        assert r.status_code == 404, r.text
