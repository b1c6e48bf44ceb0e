"""Kernel events through the real ingest API (SQLite and PostgreSQL): folded into occurrences,
escalated when a fatal fault survives reboots, an oops attributed to its module when its RIP line
comes in a later batch, pstore files read whole, one alert per occurrence and cooldown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from collector.models import Delivery
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import factory, kline, post
from tests.support.real_corpus import REAL

BOOTS = ["6f1c3a52-0000-4d4e-9f8a-1b2c3d4e5f60", "6f1c3a52-1111-4d4e-9f8a-1b2c3d4e5f60"]
BOOTS += ["6f1c3a52-2222-4d4e-9f8a-1b2c3d4e5f60", "6f1c3a52-3333-4d4e-9f8a-1b2c3d4e5f60"]
# Real lines (tests/fixtures/real/kernel): an Xid 13 of an H100 host, a GB10's Xid 79.
XID_13 = (
    "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
    "Exception on (GPC 9, TPC 1, SM 1): Out Of Range Address"
)
XID_79 = (
    "NVRM: Xid (PCI:000f:01:00): 79, pid=2231, name=pt_main_thread, GPU has fallen off the bus."
)
# The RC watchdog's hung GPU (names no GPU) and the Xid 8 its recovery prints (llama.cpp #27102).
WATCHDOG = "NVRM: krcWatchdog_IMPL: RC watchdog: GPU is probably locked!  Notify Timeout Seconds: 7"
XID_8 = "NVRM: Xid (PCI:0000:01:00): 8, pid=709378, name=llama-server, channel 0x00000027"


@pytest.fixture
def hooked(db_url: str) -> Iterator[Collector]:
    """A collector with one webhook target: kernel alerts are queued (never sent)."""
    yield from make_collector(db_url, webhook_urls="http://127.0.0.1:9/hook")


def get(c: Collector, path: str, **params: Any) -> Any:
    resp = c.client.get(f"/api/v1/hosts/spark-01/{path}", params=params, headers=c.admin)
    assert resp.status_code == 200, resp.text
    return resp.json()


def lines(seq0: int, ts0: float, texts: list[str]) -> list[dict[str, Any]]:
    return [kline(seq0 + i, ts0 + i * 0.01, text) for i, text in enumerate(texts)]


def test_an_xid_storm_is_one_occurrence_per_gpu(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    other_gpu = XID_13.replace("0000:38:00", "0000:b3:00")
    post(collector, token, "spark-01", lines=lines(1, 1000.0, [XID_13] * 30))
    post(collector, token, "spark-01", lines=lines(31, 1010.0, [XID_13] * 20 + [other_gpu] * 3))
    # A replayed batch adds nothing.
    post(collector, token, "spark-01", lines=lines(31, 1010.0, [XID_13] * 20 + [other_gpu] * 3))
    occurrences = get(collector, "occurrences")["occurrences"]
    assert [(o["kind"], o["code"], o["device"], o["count"]) for o in occurrences] == [
        ("xid", "13", "0000:b3:00", 3),
        ("xid", "13", "0000:38:00", 50),
    ]
    storm = occurrences[1]
    assert (storm["first_ts"], storm["last_ts"]) == (1000.0, pytest.approx(1010.19))
    assert (storm["severity"], storm["action"]) == ("error", "restart_app")
    events = get(collector, "events", kind="xid")["events"]
    assert len(events) == 53
    assert {(e["code"], e["severity"], e["action"]) for e in events} == {
        ("13", "error", "restart_app")
    }
    assert {e["occurrence_id"] for e in events} == {o["id"] for o in occurrences}


def test_a_fatal_fault_back_after_two_reboots_says_inspect_hardware(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    seq = 1
    for boot in BOOTS[:3]:
        post(collector, token, "spark-01", boot=boot, lines=lines(seq, 1000.0 + seq, [XID_79]))
        post(collector, token, "spark-01", boot=boot, lines=lines(seq + 1, 1001.0 + seq, [XID_13]))
        seq += 2
    events = get(collector, "events", kind="xid")["events"]  # newest first
    by_code: dict[str, list[str]] = {}
    for e in reversed(events):
        by_code.setdefault(e["code"], []).append(e["action"])
    # Seen in a first boot, then again after one reboot: reboot; after two: inspect the hardware.
    assert by_code["79"] == ["reboot", "reboot", "inspect_hardware"]
    # Not fatal: never escalated, however often it comes back.
    assert by_code["13"] == ["restart_app"] * 3
    occurrences = {o["code"]: o for o in get(collector, "occurrences")["occurrences"]}
    assert (occurrences["79"]["boots"], occurrences["79"]["action"]) == (3, "inspect_hardware")
    assert occurrences["79"]["count"] == 3 and occurrences["13"]["action"] == "restart_app"
    # Again in the same boot: counted, still escalated, no boot added.
    post(collector, token, "spark-01", boot=BOOTS[2], lines=lines(seq, 1000.0 + seq, [XID_79]))
    assert get(collector, "events", kind="xid")["events"][0]["action"] == "inspect_hardware"
    again = {o["code"]: o for o in get(collector, "occurrences")["occurrences"]}["79"]
    assert (again["boots"], again["count"], again["action"]) == (3, 4, "inspect_hardware")


def test_the_reboot_threshold_is_a_setting(sqlite_url: str) -> None:
    gen = make_collector(sqlite_url, kernel_escalate_after_reboots=1)
    c = next(gen)
    token = c.add_host("spark-01")
    for i, boot in enumerate(BOOTS[:2]):
        post(c, token, "spark-01", boot=boot, lines=lines(i + 1, 1000.0 + i, [XID_79]))
    assert [e["action"] for e in get(c, "events")["events"]] == ["inspect_hardware", "reboot"]
    gen.close()


def test_an_oops_gets_its_module_from_the_rip_line_of_a_later_batch(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    oops = (REAL / "kernel" / "ogkm-1107-oops-nvidia-vma-access.txt").read_text().splitlines()
    report = [line.split(" ", 1)[1] for line in oops if not line.startswith("# ")]
    # Each record its own batch, as the agent sends kernel lines the moment it reads them.
    for i, text in enumerate(report):
        post(collector, token, "spark-01", lines=lines(i + 1, 2000.0 + i * 0.001, [text]))
    [event] = get(collector, "events")["events"]
    assert (event["kind"], event["code"], event["module"]) == ("oops", "oops", "nvidia")
    assert "in [nvidia] at nvidia_vma_access" in event["meaning"]
    assert (event["severity"], event["action"]) == ("fatal", "reboot")


def test_pstore_files_shipped_after_a_reboot_are_read_whole(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    name = "dmesg-erst-7530486857247752193"
    text = (REAL / "pstore" / name).read_text()
    shipped = [
        {
            "seq": n,
            "ts": 3000.0,
            "source": "journal",
            "text": line,
            "fields": {"pstore_file": name, "pstore_dir": "/sys/fs/pstore", "line_no": n},
        }
        for n, line in enumerate(text.splitlines(), start=1)
    ]
    post(collector, token, "spark-01", lines=shipped)
    [event] = get(collector, "events")["events"]
    assert (event["kind"], event["code"], event["module"]) == ("oops", "panic", "crash_test")
    assert event["line"]["text"].endswith("Test panic triggered by crash_test module")


def test_pstore_lines_whose_line_no_is_not_a_number_are_stored(collector: Collector) -> None:
    """``fields`` is free-form: a line number that is a string or a list is read as none (the
    lines keep their order in the batch), never a failed batch."""
    token = collector.add_host("spark-01")
    name = "dmesg-erst-7530486857247752193"
    text = (REAL / "pstore" / name).read_text().splitlines()
    # The first lines' numbers are odd, the rest plain.
    numbers: list[Any] = ["12", [3], None, 2.0, {"n": 1}, *range(6, len(text) + 1)]
    where = {"pstore_file": name, "pstore_dir": "/sys/fs/pstore"}
    shipped = [
        {"seq": n, "ts": 3000.0, "source": "journal", "text": line,
         "fields": {**where, "line_no": numbers[n - 1]}}
        for n, line in enumerate(text, start=1)
    ]  # fmt: skip
    answer = post(collector, token, "spark-01", lines=shipped)
    assert answer["stored"]["lines"] == len(text)
    [event] = get(collector, "events")["events"]
    assert (event["kind"], event["code"]) == ("oops", "panic")


def test_one_alert_per_occurrence_and_cooldown(hooked: Collector) -> None:
    c = hooked
    token = c.add_host("spark-01")
    post(c, token, "spark-01", lines=lines(1, 1000.0, [XID_13] * 10))
    post(c, token, "spark-01", lines=lines(11, 1001.0, [XID_13] * 10 + [XID_79]))
    with factory(c)() as s:
        alerts = list(s.scalars(select(Delivery).where(Delivery.event == "kernel.event")))
    keys = sorted(a.dedup_key.rsplit(":", 1)[0] for a in alerts)
    assert keys == ["kernel.event:xid:13:0000:38:00", "kernel.event:xid:79:000f:01:00"]
    [first] = [a for a in alerts if ":13:" in a.dedup_key]
    body = json.loads(first.body)
    assert body["occurrence"]["count"] == 10 and body["count"] == 10
    assert body["kernel_event"]["action"] == "restart_app"


def kernel_alert_keys(c: Collector) -> list[str]:
    with factory(c)() as s:
        alerts = s.scalars(select(Delivery).where(Delivery.event == "kernel.event"))
        return sorted(a.dedup_key.rsplit(":", 1)[0] for a in alerts)


def test_a_locked_gpu_is_one_alert_for_the_watchdog_and_its_xid_8(hooked: Collector) -> None:
    c = hooked
    token = c.add_host("spark-01")
    post(c, token, "spark-01", lines=lines(1, 1000.0, [WATCHDOG, XID_8]))
    # Recovery failing: the watchdog alone every ~8 s, inside the cooldown
    post(c, token, "spark-01", lines=lines(3, 1008.0, [WATCHDOG]))
    assert kernel_alert_keys(c) == ["kernel.event:xid:8:0000:01:00"]
    occurrences = get(c, "occurrences")["occurrences"]
    assert sorted((o["code"], o["device"] or "", o["count"]) for o in occurrences) == [
        ("8", "", 2),
        ("8", "0000:01:00", 1),
    ]


def test_a_watchdog_alert_covers_the_xid_8_of_the_next_batch(hooked: Collector) -> None:
    c = hooked
    token = c.add_host("spark-01")
    post(c, token, "spark-01", lines=lines(1, 1000.0, [WATCHDOG]))
    post(c, token, "spark-01", lines=lines(2, 1000.5, [XID_8]))
    assert kernel_alert_keys(c) == ["kernel.event:xid:8:"]


def test_a_watchdog_alert_covers_one_gpu_not_every_gpu(hooked: Collector) -> None:
    """The watchdog names no GPU: the first Xid 8 after it is its GPU; another GPU's Xid 8 is
    another fault, and alerts inside the cooldown."""
    c = hooked
    token = c.add_host("spark-01")
    post(c, token, "spark-01", lines=lines(1, 1000.0, [WATCHDOG]))
    post(c, token, "spark-01", lines=lines(2, 1000.5, [XID_8]))
    post(c, token, "spark-01", lines=lines(3, 1001.0, [XID_8.replace("0000:01:00", "0000:02:00")]))
    assert kernel_alert_keys(c) == ["kernel.event:xid:8:", "kernel.event:xid:8:0000:02:00"]
