"""What a user receives for real multi-line kernel reports, through the real ingest API (SQLite
and PostgreSQL), the batches cut at every point: one alert per fault, at the driver's verdict.

A report the driver prints over several records is one fault: an Xid 79 and the "GPU has fallen
off the bus." line it prints right after, an NVSwitch SXid's verdict and the dump of its error
entry. A line restating it adds no event, no count and no alert, and no higher severity; a
second fault (another GPU, a later fall, the next verdict) still alerts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from agent.kernel.prefix import kernel_message
from collector.models import Delivery, Host, WebhookTarget
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import factory, kline, post
from tests.support.real_corpus import REAL

ALL, ERRORS = "http://127.0.0.1:9/all", "http://127.0.0.1:9/errors"
TARGETS = f"{ALL},{ERRORS}|min_severity=error"
T0 = 1_764_400_000.0  # the host's wall clock at its boot
_KERNEL_TIME = re.compile(r"\[\s*(\d+)\.(\d{6})\]")


def real_lines(name: str) -> list[str]:
    """The log lines of a corpus file, labels and header left out."""
    text = (REAL / "kernel" / name).read_text().splitlines()
    return [line.split(" ", 1)[1] for line in text if not line.startswith("# ")]


def records(raw: list[str], *, usec0: int = 0) -> list[tuple[str, int]]:
    """Real lines as the kernel's records: (message, kernel usec). A capture's prefix (a quote's
    '> ', the journal's or dmesg's time) is no part of the message, and the quote's blank '>'
    lines are no records. A line without the kernel's time gets ``usec0`` plus a millisecond per
    record (constructed timing)."""
    out = []
    for i, line in enumerate(raw):
        line = line[2:] if line.startswith("> ") else line
        message = kernel_message(line)
        if not message.strip(">").strip():
            continue
        t = _KERNEL_TIME.search(line)
        out.append((message, int(t.group(1)) * 10**6 + int(t.group(2)) if t else usec0 + i * 1000))
    return out


def kmsg(seq: int, message: str, usec: int) -> dict[str, Any]:
    """A record as the agent sends what it read from /dev/kmsg."""
    return {
        "seq": seq,
        "ts": round(T0 + usec / 1e6, 6),
        "source": "kmsg",
        "priority": 3,
        "kseq": seq,
        "text": message,
        "fields": {"_SOURCE_MONOTONIC_TIMESTAMP": str(usec)},
    }


def hooked_collector(db_url: str, **settings: Any) -> Iterator[Collector]:
    yield from make_collector(db_url, webhook_urls=TARGETS, **settings)


@pytest.fixture
def hooked(db_url: str) -> Iterator[Collector]:
    """Two webhook targets (queued, never sent): every kernel alert, and those of severity
    error and above (an on-call pager's floor)."""
    yield from hooked_collector(db_url)


@pytest.fixture
def eager(db_url: str) -> Iterator[Collector]:
    """The same with no alert cooldown: only the fold keeps a restatement quiet."""
    yield from hooked_collector(db_url, kernel_alert_cooldown_s=0)


_TOKENS: dict[tuple[str, str], str] = {}  # (database, host): each test has its own database


def send(c: Collector, host: str, batches: list[list[tuple[str, int]]], seq0: int = 1) -> None:
    """Post the records in these batches from ``host`` (registered on first use)."""
    key = (c.settings.db_url, host)
    token = _TOKENS.get(key)
    if token is None:
        token = _TOKENS[key] = c.add_host(host)
    seq = seq0
    for batch in batches:
        lines = []
        for message, usec in batch:
            lines.append(kmsg(seq, message, usec))
            seq += 1
        post(c, token, host, lines=lines)


def cuts(recs: list[tuple[str, int]]) -> Iterator[tuple[str, list[list[tuple[str, int]]]]]:
    """The records in one batch, then cut in two at every point."""
    yield "one", [recs]
    for k in range(1, len(recs)):
        yield f"cut{k}", [recs[:k], recs[k:]]


def alerts(c: Collector, host: str) -> list[tuple[str, str, str, str, bool]]:
    """The host's kernel alerts as the first target gets them: (kind, code, device, severity,
    whether the error-floor target got it too)."""
    with factory(c)() as s:
        host_id = s.scalars(select(Host.id).where(Host.name == host)).one()
        rows = s.execute(
            select(Delivery.dedup_key, Delivery.body, WebhookTarget.url)
            .join(WebhookTarget, WebhookTarget.id == Delivery.target_id)
            .where(Delivery.event == "kernel.event", Delivery.host_id == host_id)
            .order_by(Delivery.id)
        ).all()
    paged = {key for key, _, url in rows if url == ERRORS}
    out = []
    for key, body, url in rows:
        if url != ALL:
            continue
        event = json.loads(body)["kernel_event"]
        out.append(
            (event["kind"], event["code"], event["device"] or "", event["severity"],
             key in paged)
        )  # fmt: skip
    return out


def events(c: Collector, host: str) -> list[tuple[str, str, str, str]]:
    resp = c.client.get(
        f"/api/v1/hosts/{host}/events", params={"kind": "gpu_fault"}, headers=c.admin
    )
    assert resp.status_code == 200, resp.text
    found = [
        (e["kind"], e["code"], e["device"] or "", e["severity"]) for e in resp.json()["events"]
    ]
    return sorted(found)


def occurrences(c: Collector, host: str) -> list[tuple[str, str, str, int, str]]:
    resp = c.client.get(f"/api/v1/hosts/{host}/occurrences", headers=c.admin)
    assert resp.status_code == 200, resp.text
    return sorted(
        (o["kind"], o["code"], o["device"] or "", o["count"], o["severity"])
        for o in resp.json()["occurrences"]
    )


GPUD = "gpud-sxid-readme-xid79-sxid-20034-three-switches.txt"
T450S = "t450s-bug-report-xid79-fallen-off-bus-across-boots.txt"
NVTRUST = "nvtrust-124-sxid-22013-nonfatal-minion-dlreq.txt"
# Each: the Xid 79 and the driver's fall line after it (4 us and 9 us later), of one GPU.
FALLS = {  # by the report they come from
    "gpud": (records(real_lines(GPUD))[2:4], "0000:91:00"),
    "t450s": (records(real_lines(T450S))[7:9], "0000:01:00"),
}
# nvswitch3's SXid 22013 reports of links 44, 45, 46: each verdict, then its Severity and Data.
NONFATAL = records(real_lines(NVTRUST))[2:9]


@pytest.mark.parametrize("name", FALLS)
def test_an_xid_79_and_its_fall_line_are_one_alert(eager: Collector, name: str) -> None:
    (xid, fall), gpu = FALLS[name]
    assert "79, " in xid[0] and fall[0].endswith("GPU has fallen off the bus.")
    for cut, batches in cuts([xid, fall]):
        send(eager, cut, batches)
        assert alerts(eager, cut) == [("xid", "79", gpu, "fatal", True)], cut
        assert events(eager, cut) == [("xid", "79", gpu, "fatal")], cut
        assert occurrences(eager, cut) == [("xid", "79", gpu, 1, "fatal")], cut


def test_a_non_fatal_sxid_alerts_once_at_its_verdict(hooked: Collector) -> None:
    """The dump's Severity and Data lines restate their verdict: no alert of their own, and no
    'error' that would page a target whose floor is error for a non-fatal link error."""
    assert [m.split(", ")[1].split(" ")[0] for m, _ in NONFATAL] == [
        "Non-fatal", "Severity", "Data", "Non-fatal", "Severity", "Data", "Non-fatal",
    ]  # fmt: skip
    for cut, batches in cuts(NONFATAL):
        send(hooked, cut, batches)
        assert alerts(hooked, cut) == [("sxid", "22013", "0000:04:00", "warning", False)], cut
        assert events(hooked, cut) == [("sxid", "22013", "0000:04:00", "warning")] * 3, cut
        assert occurrences(hooked, cut) == [("sxid", "22013", "0000:04:00", 3, "warning")], cut


def test_with_no_cooldown_each_verdict_alerts_and_no_dump_does(eager: Collector) -> None:
    for cut, batches in cuts(NONFATAL[:3]):
        send(eager, cut, batches)
        assert alerts(eager, cut) == [("sxid", "22013", "0000:04:00", "warning", False)], cut
    # The next verdict is the next fault: it alerts (no cooldown), its dump does not.
    send(eager, "next", [NONFATAL[:3], NONFATAL[3:6]])
    assert alerts(eager, "next") == [("sxid", "22013", "0000:04:00", "warning", False)] * 2


def test_three_switches_reporting_at_once_alert_once_each(hooked: Collector) -> None:
    """gpud's excerpt: an Xid 79 with its fall line, then three NVSwitches' fatal SXid 20034
    reports interleaved (nvswitch2's first dump of a report whose verdict the excerpt left
    out: fatal by its own Severity 1)."""
    recs = records(real_lines(GPUD))
    assert len(recs) == 13
    for cut, batches in cuts(recs):
        send(hooked, cut, batches)
        assert sorted(alerts(hooked, cut)) == [
            ("sxid", "20034", "0000:05:00", "fatal", True),
            ("sxid", "20034", "0000:06:00", "fatal", True),
            ("sxid", "20034", "0000:07:00", "fatal", True),
            ("xid", "79", "0000:91:00", "fatal", True),
        ], cut
        assert events(hooked, cut) == [
            ("sxid", "20034", "0000:05:00", "fatal"),
            ("sxid", "20034", "0000:05:00", "fatal"),
            ("sxid", "20034", "0000:06:00", "fatal"),
            ("sxid", "20034", "0000:07:00", "fatal"),
            ("sxid", "20034", "0000:07:00", "fatal"),
            ("xid", "79", "0000:91:00", "fatal"),
        ], cut


def test_another_gpus_fall_still_alerts(hooked: Collector) -> None:
    """Two GPUs falling one after the other (the two reports' lines, a second apart)."""
    (first, gpu1), (second, gpu2) = FALLS["gpud"], FALLS["t450s"]
    shifted = [(m, first[1][1] + 10**6 + u - second[0][1]) for m, u in second]
    for cut, batches in cuts([*first, *shifted]):
        send(hooked, cut, batches)
        assert sorted(alerts(hooked, cut)) == [
            ("xid", "79", gpu2, "fatal", True),
            ("xid", "79", gpu1, "fatal", True),
        ], cut


def test_a_fall_line_minutes_after_the_xid_79_is_another_fall(hooked: Collector) -> None:
    """Constructed timing around real lines: the same GPU's fall line as the next record, but
    three minutes after its Xid 79 (or after the Xid 79 and the fall line restating it), is
    not a restatement: another fall, and it alerts."""
    (xid, fall), gpu = FALLS["t450s"]
    later = (fall[0], fall[1] + 180 * 10**6)
    for name, recs in (("next", [xid, later]), ("third", [xid, fall, later])):
        for cut, batches in cuts(recs):
            send(hooked, f"{name}-{cut}", batches)
            assert alerts(hooked, f"{name}-{cut}") == [
                ("xid", "79", gpu, "fatal", True),
                ("bus_off", "79", gpu, "fatal", True),
            ], (name, cut)


def test_a_replayed_batch_never_alerts_again(eager: Collector) -> None:
    (xid, fall), gpu = FALLS["gpud"]
    send(eager, "spark-01", [[xid, fall]])
    send(eager, "spark-01", [[xid, fall]])  # the same seqs again: a replay
    send(eager, "spark-01", [[fall]], seq0=2)  # a retry of the fall line alone
    assert alerts(eager, "spark-01") == [("xid", "79", gpu, "fatal", True)]
    send(eager, "spark-02", [[xid]])
    send(eager, "spark-02", [[xid, fall]])  # a retried batch that grew
    assert alerts(eager, "spark-02") == [("xid", "79", gpu, "fatal", True)]
    assert events(eager, "spark-02") == [("xid", "79", gpu, "fatal")]


def test_a_locked_gpus_watchdog_and_its_xid_8_are_one_alert(hooked: Collector) -> None:
    """The RC watchdog's 'GPU is probably locked' (no GPU named), the driver's GPU lines, then
    the Xid 8 of that GPU (llama.cpp #27102, as the corpus keeps it)."""
    raw = real_lines("blackwell-595-610-xid154-pmu-halt-gsp-watchdog.txt")
    start = next(i for i, line in enumerate(raw) if "krcWatchdog" in line)
    recs = records(raw[start : start + 4], usec0=5_000_000_000)
    for cut, batches in cuts(recs):
        send(hooked, cut, batches)
        assert len(alerts(hooked, cut)) == 1, cut


def test_an_smmu_fault_header_and_its_decoded_line_stay_quiet(eager: Collector) -> None:
    """SMMUv3's 'event 0x10 received:' and its decoded F_TRANSLATION line: an IOMMU fault
    never alerts on its own, however its lines are cut."""
    recs = records(real_lines("iommu-arm-smmu-v3-translation-faults.txt")[:7])
    for cut, batches in cuts(recs):
        send(eager, cut, batches)
        assert alerts(eager, cut) == [], cut


def test_records_without_kernel_time_or_kmsg_seq_fold_too(eager: Collector) -> None:
    """An older agent's records carry no kernel usec: their own stamps say when. The journal's
    catch-up of a frozen boot carries no kmsg seq: a batch's records are read together."""
    (xid, fall), gpu = FALLS["t450s"]
    plain = [kline(i + 1, T0 + usec / 1e6, text) for i, (text, usec) in enumerate([xid, fall])]
    for cut, batches in (("one", [plain]), ("cut1", [plain[:1], plain[1:]])):
        token = eager.add_host(cut)
        for batch in batches:
            post(eager, token, cut, lines=batch)
        assert alerts(eager, cut) == [("xid", "79", gpu, "fatal", True)], cut
    catchup = [
        {**kmsg(i + 1, text, usec), "kseq": None} for i, (text, usec) in enumerate([xid, fall])
    ]
    for line in catchup:
        line["fields"]["via"] = "journal"
    post(eager, eager.add_host("catchup"), "catchup", lines=catchup)
    assert alerts(eager, "catchup") == [("xid", "79", gpu, "fatal", True)]
    assert events(eager, "catchup") == [("xid", "79", gpu, "fatal")]


# arm64's fatal SError: its "SError Interrupt on CPU<n>" line is the event, and the
# "Asynchronous SError Interrupt" panic arm64_serror_panic prints after the registers (here 22
# records, 110 us later) restates it.
ROCK = "lore-rockpro64-arm64-serror-panic-pcie-bus-scan.txt"
SERROR = records(real_lines(ROCK))[:24]  # the SError line .. the panic's CPU line


def oopses(c: Collector, host: str) -> list[tuple[str, str, str]]:
    resp = c.client.get(f"/api/v1/hosts/{host}/events", params={"kind": "oops"}, headers=c.admin)
    assert resp.status_code == 200, resp.text
    return sorted((e["kind"], e["code"], e["severity"]) for e in resp.json()["events"])


def test_an_serror_line_and_its_panic_are_one_alert(eager: Collector) -> None:
    assert "SError Interrupt on CPU5" in SERROR[0][0]
    assert SERROR[22][0] == "Kernel panic - not syncing: Asynchronous SError Interrupt"
    for cut, batches in cuts(SERROR):
        send(eager, cut, batches)
        assert alerts(eager, cut) == [("oops", "serror", "", "fatal", True)], cut
        assert oopses(eager, cut) == [("oops", "serror", "fatal")], cut
        assert occurrences(eager, cut) == [("oops", "serror", "", 1, "fatal")], cut


def test_an_serror_line_alone_alerts(eager: Collector) -> None:
    """The host froze before the panic left it: the SError line (and its registers) alone."""
    for name, recs in (("line", SERROR[:1]), ("registers", SERROR[:22])):
        send(eager, name, [recs])
        assert alerts(eager, name) == [("oops", "serror", "", "fatal", True)], name


def test_an_serror_panic_alone_alerts(eager: Collector) -> None:
    """Its SError line lost (another channel, a cut capture): the panic is the event."""
    send(eager, "panic", [SERROR[22:]])
    assert alerts(eager, "panic") == [("oops", "panic", "", "fatal", True)]
    assert oopses(eager, "panic") == [("oops", "panic", "fatal")]


def test_an_serror_panic_seconds_after_an_serror_line_is_another_fault(hooked: Collector) -> None:
    """Constructed timing around real lines: the panic as the next record, but five seconds
    after the SError line, is no restatement of it."""
    line, panic = SERROR[0], SERROR[22]
    later = (panic[0], line[1] + 5 * 10**6)
    for cut, batches in cuts([line, later]):
        send(hooked, cut, batches)
        assert sorted(alerts(hooked, cut)) == [
            ("oops", "panic", "", "fatal", True),
            ("oops", "serror", "", "fatal", True),
        ], cut


def test_serror_lines_that_are_no_panic_stay_quiet(eager: Collector) -> None:
    """NVIDIA's downstream kernel's 'CPUn: SError detected, ...' and its debugging's
    'CPUn: SError: mpidr=...' lines: no event, no alert."""
    raw = real_lines("tegra-serror-downstream-hook-lines-and-tx2-serror.txt")
    quiet = [line for line in raw if "SError detected" in line or "SError: mpidr" in line]
    assert len(quiet) == 9
    send(eager, "tegra", [records(quiet)])
    assert alerts(eager, "tegra") == []
    assert oopses(eager, "tegra") == []
