"""The hosts page's status board: covered buckets, incidents, freezes and the sparkline."""

from __future__ import annotations

import time
from typing import Any

from collector.readback.board import RANGES
from tests.collector.conftest import Collector
from tests.collector.freeze_support import BOOT_B, post, sample
from tests.collector.incidents.test_lifecycle import lose

GIB = 2**30


def board(c: Collector, name: str) -> dict[str, Any]:
    hosts = c.client.get("/api/v1/hosts", headers=c.admin).json()
    return next(h for h in hosts if h["name"] == name)["board"]


def away_from_a_minute_boundary(start_s: float = 2.0, end_s: float = 50.0) -> None:
    """The board's minutes are the collector's clock's at the request: run between
    ``start_s`` and ``end_s`` into a minute, so that the samples up to a second ago fall in
    the current minute and no minute turns before the requests (it failed once when one did)."""
    second = time.time() % 60.0
    if second < start_s:
        time.sleep(start_s - second)
    elif second >= end_s:
        time.sleep(60.0 - second + start_s)


def test_a_host_that_froze_has_its_freeze_and_covered_minutes(collector: Collector) -> None:
    away_from_a_minute_boundary()
    token = collector.add_host("spark-01")
    collector.add_host("spark-02")
    now = time.time()
    # Samples 10 and 9 minutes ago, then 20 s until now with a dip: then the host goes silent.
    old = [sample(i + 1, now - 600 + i, 50 * GIB) for i in range(60)]
    recent = [sample(100 + i, now - 20 + i, (30 - i) * GIB) for i in range(20)]
    post(collector, token, "spark-01", samples=old + recent)
    iid = lose(collector)
    post(collector, token, "spark-01", boot=BOOT_B)

    b = board(collector, "spark-01")
    hour = b["ranges"]["1h"]
    assert (hour["step"], len(hour["covered"])) == (60, 60)
    assert hour["since"] <= now - 59 * 60 < hour["since"] + 60
    assert hour["covered"][-1] == "1" and hour["covered"][:40] == "0" * 40
    assert hour["covered"].count("1") in (2, 3, 4)  # two old minutes, the last one or two
    assert [len(b["ranges"][n]["covered"]) for n, _s, _b in RANGES] == [60, 96, 168]
    assert b["ranges"]["7d"]["covered"].endswith("1")

    assert [(s["id"], s["kind"], s["resolution"]) for s in b["incidents"]] == [
        (iid, "unreachable", "rebooted")
    ]
    assert b["freezes"] == {"24h": 1, "7d": 1}
    assert b["last_freeze"]["id"] == iid and b["last_freeze"]["url"] == f"/incidents/{iid}"
    # The sparkline: the lowest MemAvailable of each minute of the last hour.
    assert len(b["mem"]["available"]) == 60 and b["mem"]["total"] == 128 * GIB
    assert min(v for v in b["mem"]["available"] if v is not None) == 11 * GIB
    assert b["mem"]["available"][0] is None

    quiet = board(collector, "spark-02")
    assert quiet["ranges"]["24h"]["covered"] == "0" * 96
    assert quiet["incidents"] == [] and quiet["last_freeze"] is None
    assert quiet["freezes"] == {"24h": 0, "7d": 0}
