"""Every paged read refuses a limit outside 1..MAX_LIMIT with a 400 that says so (on SQLite a
negative LIMIT would return every row)."""

from __future__ import annotations

import pytest

from collector.readback.series import MAX_LIMIT
from tests.collector.conftest import Collector

PAGED = ["lines", "events", "occurrences"]


@pytest.mark.parametrize("route", PAGED)
@pytest.mark.parametrize("limit", [0, -1, MAX_LIMIT + 1])
def test_a_limit_out_of_range_is_a_400(collector: Collector, route: str, limit: int) -> None:
    collector.add_host("spark-01")
    r = collector.client.get(
        f"/api/v1/hosts/spark-01/{route}", params={"limit": limit}, headers=collector.admin
    )
    assert r.status_code == 400, r.text
    assert "limit must be between 1 and" in r.text


@pytest.mark.parametrize("route", PAGED)
def test_the_largest_limit_is_accepted(collector: Collector, route: str) -> None:
    collector.add_host("spark-01")
    r = collector.client.get(
        f"/api/v1/hosts/spark-01/{route}", params={"limit": MAX_LIMIT}, headers=collector.admin
    )
    assert r.status_code == 200, r.text
