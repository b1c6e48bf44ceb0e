"""Uncorrected PCIe AER errors through the real ingest API (SQLite and PostgreSQL): stored,
on the timeline and the incident; a fatal one alerts once per port and cooldown, a non-fatal
one and corrected floods never alert."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from collector.models import Delivery
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import factory, kline, post, sample
from tests.collector.incidents.test_lifecycle import lose
from tests.support.real_corpus import REAL

KERNEL = REAL / "kernel"


def real_lines(name: str) -> list[str]:
    """The log lines of a corpus file, labels and header left out."""
    text = (KERNEL / name).read_text().splitlines()
    return [line.split(" ", 1)[1] for line in text if not line.startswith("# ")]


# A Tesla's root port losing its GPU (wilicc/gpu-burn#1), the first report of the fatal file.
FATAL_REPORT = real_lines("aer-uncorrected-fatal-gpu-link.txt")[4:12]
FATAL_LINE = FATAL_REPORT[1]
NONFATAL = FATAL_LINE.replace("(Fatal)", "(Non-Fatal)")
OTHER_PORT = FATAL_LINE.replace("0000:00:02.0", "0000:00:03.0")


@pytest.fixture
def hooked(db_url: str) -> Iterator[Collector]:
    """A collector with one webhook target: kernel alerts are queued (never sent)."""
    yield from make_collector(db_url, webhook_urls="http://127.0.0.1:9/hook")


def lines(seq0: int, ts0: float, texts: list[str]) -> list[dict[str, Any]]:
    return [kline(seq0 + i, ts0 + i * 0.01, text) for i, text in enumerate(texts)]


def kernel_alerts(c: Collector) -> list[Delivery]:
    with factory(c)() as s:
        return list(s.scalars(select(Delivery).where(Delivery.event == "kernel.event")))


def events(c: Collector, **params: Any) -> list[dict[str, Any]]:
    resp = c.client.get("/api/v1/hosts/spark-01/events", params=params, headers=c.admin)
    assert resp.status_code == 200, resp.text
    return resp.json()["events"]  # type: ignore[no-any-return]


def test_a_fatal_aer_alerts_once_per_port_and_cooldown(hooked: Collector) -> None:
    c = hooked
    token = c.add_host("spark-01")
    post(c, token, "spark-01", lines=lines(1, 1000.0, FATAL_REPORT))
    # The same port again inside the cooldown: counted, not alerted; another port alerts.
    post(c, token, "spark-01", lines=lines(20, 1001.0, [FATAL_LINE, OTHER_PORT]))
    keys = sorted(a.dedup_key.rsplit(":", 1)[0] for a in kernel_alerts(c))
    assert keys == ["kernel.event:aer:fatal:0000:00:02.0", "kernel.event:aer:fatal:0000:00:03.0"]
    [first] = [a for a in kernel_alerts(c) if "0000:00:02.0" in a.dedup_key]
    body = json.loads(first.body)
    event = body["kernel_event"]
    assert (event["kind"], event["code"], event["device"]) == ("aer", "fatal", "0000:00:02.0")
    assert (event["severity"], event["action"], event["gpu_fault"]) == ("fatal", "reboot", False)
    assert body["lines"][0]["text"] == FATAL_LINE
    stored = events(c, kind="aer")
    assert [(e["code"], e["device"]) for e in stored] == [
        ("fatal", "0000:00:03.0"),
        ("fatal", "0000:00:02.0"),
        ("fatal", "0000:00:02.0"),
    ]
    assert events(c, kind="gpu_fault") == []  # a PCIe error, not a GPU fault of its own


def test_past_the_cooldown_the_same_port_alerts_again(sqlite_url: str) -> None:
    gen = make_collector(
        sqlite_url, webhook_urls="http://127.0.0.1:9/hook", kernel_alert_cooldown_s=0
    )
    c = next(gen)
    token = c.add_host("spark-01")
    post(c, token, "spark-01", lines=lines(1, 1000.0, [FATAL_LINE]))
    post(c, token, "spark-01", lines=lines(2, 1001.0, [FATAL_LINE]))
    assert len(kernel_alerts(c)) == 2
    gen.close()


def test_nonfatal_aer_and_corrected_floods_never_alert(hooked: Collector) -> None:
    c = hooked
    token = c.add_host("spark-01")
    flood = real_lines("aer-corrected-floods-benign.txt")
    post(c, token, "spark-01", lines=lines(1, 1000.0, flood * 3))
    assert events(c) == []
    post(c, token, "spark-01", lines=lines(200, 1010.0, [NONFATAL] * 5))
    stored = events(c, kind="aer")
    assert {(e["code"], e["severity"], e["action"]) for e in stored} == {
        ("nonfatal", "error", "none")
    }
    assert len(stored) == 5
    assert kernel_alerts(c) == []


def test_an_aer_before_the_silence_is_the_incidents_cause(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    t_last = time.time()
    post(
        collector,
        token,
        "spark-01",
        samples=[sample(i, t_last - 10 + i) for i in range(1, 11)],
        lines=lines(1, t_last - 5, FATAL_REPORT),
    )
    iid = lose(collector)
    api, admin = collector.client, collector.admin
    opened = api.get(f"/api/v1/incidents/{iid}", headers=admin).json()
    assert [(e["kind"], e["code"]) for e in opened["kernel_events"]] == [("aer", "fatal")]
    (listed,) = api.get("/api/v1/incidents", headers=admin).json()
    assert (listed["cause"]["kind"], listed["cause"]["text"]) == ("aer", FATAL_LINE)
    timeline = api.get("/api/v1/hosts/spark-01/timeline", headers=admin).json()
    assert [(m["kind"], m["code"]) for m in timeline["markers"]] == [("aer", "fatal")]
