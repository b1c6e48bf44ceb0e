"""IOMMU faults through the real ingest API (SQLite and PostgreSQL): a fault storm is one
occurrence per fault and device, shown and counted but never alerted on its own; an IOMMU fault
before a silence is on the incident and the timeline."""

from __future__ import annotations

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


def real_lines(name: str) -> list[str]:
    """The log lines of a corpus file, labels and header left out."""
    text = (REAL / "kernel" / name).read_text().splitlines()
    return [line.split(" ", 1)[1] for line in text if not line.startswith("# ")]


# An r8125 NIC's translation-fault storm on an RK3588 (newer kernel: raw record and decoded
# line per fault), the last block of the SMMUv3 file: ten faults, 70 lines.
STORM = real_lines("iommu-arm-smmu-v3-translation-faults.txt")[-70:]
DEVICE = "0002:21:00.0"


@pytest.fixture
def hooked(db_url: str) -> Iterator[Collector]:
    """A collector with one webhook target: kernel alerts are queued (never sent)."""
    yield from make_collector(db_url, webhook_urls="http://127.0.0.1:9/hook")


def lines(seq0: int, ts0: float, texts: list[str]) -> list[dict[str, Any]]:
    return [kline(seq0 + i, ts0 + i * 0.001, text) for i, text in enumerate(texts)]


def get(c: Collector, path: str, **params: Any) -> Any:
    resp = c.client.get(f"/api/v1/hosts/spark-01/{path}", params=params, headers=c.admin)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_a_fault_storm_is_one_occurrence_per_device_and_never_alerts(hooked: Collector) -> None:
    c = hooked
    token = c.add_host("spark-01")
    assert STORM[0].endswith("event 0x10 received:") and len(STORM) == 70
    post(c, token, "spark-01", lines=lines(1, 1000.0, STORM))
    post(c, token, "spark-01", lines=lines(1, 1000.0, STORM))  # a replayed batch adds nothing
    occurrences = get(c, "occurrences")["occurrences"]
    assert {(o["kind"], o["code"], o["device"], o["count"]) for o in occurrences} == {
        ("iommu", "F_TRANSLATION", DEVICE, 10),
        ("iommu", "F_TRANSLATION", None, 10),  # each raw record's header: no device
    }
    events = get(c, "events", kind="iommu")["events"]
    assert len(events) == 20
    named = [e for e in events if e["device"] == DEVICE]
    assert {(e["pci"], e["severity"], e["action"], e["gpu_fault"]) for e in named} == {
        (DEVICE, "error", "none", False)
    }
    assert {e["meaning"] for e in named} == {
        f"IOMMU fault on {DEVICE} at 0x0: SMMUv3 F_TRANSLATION: no mapping for the address",
        f"IOMMU fault on {DEVICE} at 0x100: SMMUv3 F_TRANSLATION: no mapping for the address",
    }
    assert get(c, "events", kind="gpu_fault")["events"] == []  # any device's, not a GPU fault
    with factory(c)() as s:
        assert list(s.scalars(select(Delivery).where(Delivery.event == "kernel.event"))) == []


def test_an_iommu_fault_before_the_silence_is_on_the_incident(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    t_last = time.time()
    fault = real_lines("iommu-intel-dmar-faults.txt")[:2]  # the status line, then the record
    post(
        collector,
        token,
        "spark-01",
        samples=[sample(i, t_last - 10 + i) for i in range(1, 11)],
        lines=lines(1, t_last - 5, fault),
    )
    iid = lose(collector)
    api, admin = collector.client, collector.admin
    opened = api.get(f"/api/v1/incidents/{iid}", headers=admin).json()
    assert [(e["kind"], e["code"], e["device"]) for e in opened["kernel_events"]] == [
        ("iommu", "reason_0x71", "03:00.0")
    ]
    (listed,) = api.get("/api/v1/incidents", headers=admin).json()
    assert (listed["cause"]["kind"], listed["cause"]["text"]) == ("iommu", fault[1])
    timeline = get(collector, "timeline")
    assert [(m["kind"], m["code"]) for m in timeline["markers"]] == [("iommu", "reason_0x71")]
