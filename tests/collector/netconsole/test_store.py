"""The netconsole channel end to end: real UDP datagrams to a running collector, SQLite and
PostgreSQL; stored lines, loss counters, raw datagrams, merge with the agent's copy, canary."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from agent.canary import canary_text
from agent.wire import INGEST_PATH
from collector import cli, db
from collector.models import Boot, Delivery, Host, KernelEventRow, Line, NetconsoleDatagram
from tests.collector.conftest import Collector, make_collector

BOOT = "6f1c3a52-8c1e-4d4e-9f8a-1b2c3d4e5f60"
ME = "127.0.0.1"
STRANGER = "127.0.0.2"  # also loopback on Linux, but not on any allowlist


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((ME, 0))
        return int(s.getsockname()[1])


@pytest.fixture
def nc(db_url: str) -> Iterator[Collector]:
    yield from make_collector(
        db_url,
        netconsole_bind=f"{ME}:{free_udp_port()}",
        netconsole_fragment_timeout_s=0.3,
    )


def body(
    text: bytes, *, msgid: int | None = None, boot: str | None = BOOT, extra: bytes = b""
) -> bytes:
    out = text + extra
    if msgid is not None:
        out += b"\n msgid=%d" % msgid
    if boot is not None:
        out += b"\n boot=" + boot.encode()
    return out


def ext(kseq: int, payload: bytes, *, prefix: int = 6, usec: int = 1_000_000) -> bytes:
    return b"%d,%d,%d,-;" % (prefix, kseq, usec + kseq) + payload


def fragments(kseq: int, payload: bytes, size: int) -> list[bytes]:
    """The kernel's ncfrag split of one record body into ``size``-byte pieces."""
    total = len(payload)
    return [
        b"%d,%d,%d,-,ncfrag=%d/%d;" % (6, kseq, 1_000_000 + kseq, off, total)
        + payload[off : off + size]
        for off in range(0, total, size)
    ]


def send(c: Collector, datagrams: list[bytes], source: str = ME) -> None:
    port = c.client.app.state.netconsole.receiver.address[1]  # type: ignore[attr-defined]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((source, 0))
        for d in datagrams:
            s.sendto(d, (ME, port))


def session(c: Collector) -> Any:
    return db.session_scope(c.client.app.state.sessionmaker)  # type: ignore[attr-defined]


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def nc_lines(c: Collector) -> list[Line]:
    with session(c) as s:
        return list(s.scalars(select(Line).order_by(Line.id)))


def add_nc_host(c: Collector, name: str = "spark-01", addrs: tuple[str, ...] = (ME,)) -> str:
    token = c.add_host(name)
    r = c.client.patch(
        f"/api/v1/hosts/{name}", json={"netconsole_from": list(addrs)}, headers=c.admin
    )
    assert r.status_code == 200, r.text
    return token


def test_extended_fragments_escapes_gaps_plain_and_strangers(nc: Collector) -> None:
    add_nc_host(nc)
    frag_payload = body(b"BUG: soft lockup - CPU#3 stuck for 22s! [vllm:4242] " * 3, msgid=3)
    frag = fragments(12, frag_payload, 50)
    assert len(frag) >= 4
    holed_payload = body(
        b"NVRM: Xid (PCI:000f:01:00): 79, GPU has fallen off the bus " * 2, msgid=4
    )
    holed = fragments(13, holed_payload, 40)
    datagrams = [
        ext(10, body(b"first record", msgid=1), prefix=4),
        ext(
            11, body(b"esc \\x1b[1mbold\\x1b[0m caf\\xc3\\xa9", msgid=2, extra=b"\n SUBSYSTEM=pci")
        ),
        *[frag[i] for i in (2, 0, 3, 1, *range(4, len(frag)))],  # out of order
        holed[0],
        *holed[2:],  # holed[1] never arrives
        ext(15, body(b"after a gap", msgid=6)),  # msgid 5 lost on the wire
        b"[  123.456789] plain console text\n",
    ]
    send(nc, [ext(99, body(b"from a stranger", msgid=1))], source=STRANGER)
    send(nc, datagrams)

    wait_until(lambda: len(nc_lines(nc)) == 6, "six records")
    lines = {(line.kseq if line.kseq is not None else "plain"): line for line in nc_lines(nc)}
    assert sorted(lines, key=str) == sorted([10, 11, 12, 13, 15, "plain"], key=str)
    assert lines[10].text == "first record" and lines[10].priority == 4
    assert lines[11].text == "esc \x1b[1mbold\x1b[0m café"
    assert lines[11].fields["SUBSYSTEM"] == "pci" and lines[11].fields["msgid"] == 2
    assert lines[12].text == "BUG: soft lockup - CPU#3 stuck for 22s! [vllm:4242] " * 3
    assert not lines[12].truncated
    assert lines[13].truncated and "[netconsole: 40 bytes missing]" in lines[13].text
    assert lines[13].fields["missing_bytes"] == 40
    assert lines["plain"].text == "[  123.456789] plain console text"
    assert lines["plain"].seq is None
    for line in lines.values():
        assert line.source == "netconsole" and line.channels == 2 and line.seq is None
        assert line.netconsole_received_at is not None and line.agent_received_at is None
    with session(nc) as s:
        boots = {b.id: b.boot_id for b in s.scalars(select(Boot))}
        raw = s.scalar(select(func.count()).select_from(NetconsoleDatagram))
    assert boots[lines[10].boot_pk] == BOOT
    assert raw == len(datagrams)  # every allowlisted datagram, stranger's not

    host = nc.client.get("/api/v1/hosts/spark-01", headers=nc.admin).json()
    # msgids 1,2,3,4(late, incomplete),6: 5 is the one loss
    assert host["netconsole"]["received"] == 6
    assert host["netconsole"]["lost_msgid"] == 1
    assert host["netconsole"]["incomplete"] == 1
    assert host["netconsole"]["last_line_at"] is not None
    stats = nc.client.get("/api/v1/netconsole", headers=nc.admin).json()
    assert stats["enabled"] and stats["unknown_senders"] == {STRANGER: 1}
    assert stats["datagrams"] == len(datagrams)
    metrics = nc.client.get("/metrics").text
    assert "freezewatch_netconsole_unknown_datagrams_total 1" in metrics


def test_without_boot_userdata_the_hosts_current_boot_is_used(nc: Collector) -> None:
    token = add_nc_host(nc)
    agent_batch(nc, token, [])  # the agent reports boot BOOT
    send(nc, [ext(7, body(b"no boot userdata", boot=None))])
    wait_until(lambda: len(nc_lines(nc)) == 1, "the record")
    with session(nc) as s:
        boot = s.get(Boot, nc_lines(nc)[0].boot_pk)
        assert boot is not None and boot.boot_id == BOOT


def agent_batch(c: Collector, token: str, lines: list[dict[str, Any]]) -> dict[str, Any]:
    payload = {
        "host": "spark-01",
        "boot_id": BOOT,
        "agent": {"version": "0.1.0", "pid": 4242},
        "lines": lines,
    }
    r = c.client.post(
        INGEST_PATH,
        content=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    return r.json()


def kline(seq: int, kseq: int, text: str, ts: float = 1764400000.0) -> dict[str, Any]:
    return {"seq": seq, "ts": ts, "source": "kmsg", "priority": 3, "kseq": kseq, "text": text}


@pytest.mark.parametrize("first", ["udp", "http"])
def test_a_record_from_both_channels_is_one_row_knowing_both(nc: Collector, first: str) -> None:
    token = add_nc_host(nc)
    text = "NVRM: Xid (PCI:000f:01:00): 13, Graphics Exception"
    result = None
    if first == "udp":
        send(nc, [ext(500, body(text.encode(), msgid=1))])
        wait_until(lambda: len(nc_lines(nc)) == 1, "the netconsole copy")
        result = agent_batch(nc, token, [kline(1, 500, text), kline(2, 501, "next")])
    else:
        result = agent_batch(nc, token, [kline(1, 500, text), kline(2, 501, "next")])
        send(nc, [ext(500, body(text.encode(), msgid=1))])
        wait_until(lambda: any(line.netconsole_received_at for line in nc_lines(nc)), "the merge")
    # The agent had not delivered it before: stored, not a duplicate, whichever came first.
    assert result["stored"]["lines"] == 2 and result["duplicates"]["lines"] == 0
    rows = [line for line in nc_lines(nc) if line.kseq == 500]
    assert len(rows) == 1
    row = rows[0]
    assert row.channels == 3 and row.seq == 1 and row.text == text
    assert row.agent_received_at is not None and row.netconsole_received_at is not None
    assert row.source == "kmsg"  # the agent's copy is the authoritative one
    replay = agent_batch(nc, token, [kline(1, 500, text), kline(2, 501, "next")])
    assert replay["stored"]["lines"] == 0 and replay["duplicates"]["lines"] == 2
    assert len(nc_lines(nc)) == 2


def test_canary_latency_and_loss_per_channel(nc: Collector) -> None:
    token = add_nc_host(nc)
    sent = time.time() - 1.0  # a second before now: every latency is at least 1000 ms
    canaries = [(n, canary_text(n, sent + n * 0.001)) for n in range(1, 6)]
    agent_batch(nc, token, [kline(n, 100 + n, t, ts=sent) for n, t in canaries])
    dropped = 3
    send(
        nc,
        [ext(100 + n, body(t.encode(), msgid=n), prefix=13) for n, t in canaries if n != dropped],
    )
    wait_until(
        lambda: sum(1 for line in nc_lines(nc) if line.channels == 3) == 4, "four merged canaries"
    )
    host = nc.client.get("/api/v1/hosts/spark-01", headers=nc.admin).json()
    kmsg, netconsole = host["canary"]["kmsg"], host["canary"]["netconsole"]
    assert (kmsg["received"], kmsg["lost"]) == (5, 0)
    assert (netconsole["received"], netconsole["lost"]) == (4, 1)
    for channel in (kmsg, netconsole):
        assert channel["p50_ms"] >= 990 and channel["p99_ms"] >= channel["p50_ms"]
    assert host["netconsole"]["lost_msgid"] == 1


def test_patch_netconsole_from_refreshes_the_allowlist(nc: Collector) -> None:
    nc.add_host("spark-01")
    nc.add_host("spark-02")
    send(nc, [ext(1, body(b"before the allowlist"))])
    wait_until(
        lambda: (
            nc.client.get("/api/v1/netconsole", headers=nc.admin).json()["unknown_datagrams"] == 1
        ),
        "the dropped datagram",
    )
    r = nc.client.patch("/api/v1/hosts/spark-01", json={"netconsole_from": [ME]}, headers=nc.admin)
    assert r.status_code == 200 and r.json()["netconsole_from"] == [ME]
    send(nc, [ext(2, body(b"after the allowlist"))])
    wait_until(lambda: len(nc_lines(nc)) == 1, "the accepted datagram")
    assert nc_lines(nc)[0].text == "after the allowlist"

    taken = nc.client.patch(
        "/api/v1/hosts/spark-02", json={"netconsole_from": [ME]}, headers=nc.admin
    )
    assert taken.status_code == 409
    bad = nc.client.patch(
        "/api/v1/hosts/spark-02", json={"netconsole_from": ["not-an-ip"]}, headers=nc.admin
    )
    assert bad.status_code == 422
    assert nc.client.patch("/api/v1/hosts/spark-02", json={}).status_code == 401


def test_add_host_cli_sets_netconsole_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    argv = ["add-host", "spark-09", "--db", url, "--netconsole-from", "10.0.0.9"]
    assert cli.main([*argv, "--netconsole-from", "::ffff:10.0.0.19"]) == 0
    engine = db.make_engine(url)
    with db.session_scope(db.make_sessionmaker(engine)) as s:
        host = s.scalar(select(Host).where(Host.name == "spark-09"))
        assert host is not None and host.netconsole_from == ["10.0.0.9", "10.0.0.19"]
    assert cli.main(["add-host", "spark-10", "--db", url, "--netconsole-from", "10.0.0.9"]) == 1
    assert "already belongs to 'spark-09'" in capsys.readouterr().err
    # With --rotate-token (an existing host, no --update) the address is not dropped either.
    assert cli.main([*argv[:4], "--rotate-token", "--netconsole-from", "10.0.0.29"]) == 0
    with db.session_scope(db.make_sessionmaker(engine)) as s:
        host = s.scalar(select(Host).where(Host.name == "spark-09"))
        assert host is not None and host.netconsole_from == ["10.0.0.29"]
    engine.dispose()


def test_a_burst_sent_as_fast_as_possible_is_all_persisted_and_parsed(nc: Collector) -> None:
    add_nc_host(nc)
    n = 20_000
    send(nc, [ext(k, body(b"NVRM: Xid storm line %d" % k, msgid=k + 1)) for k in range(n)])

    def raw_count() -> int:
        with session(nc) as s:
            return s.scalar(select(func.count()).select_from(NetconsoleDatagram)) or 0

    def line_count() -> int:
        with session(nc) as s:
            return s.scalar(select(func.count()).select_from(Line)) or 0

    wait_until(lambda: raw_count() == n and line_count() == n, "every datagram, raw and parsed")
    with session(nc) as s:
        kseqs = set(s.scalars(select(Line.kseq)))
        last = s.scalar(select(Line).where(Line.kseq == n - 1))
    assert kseqs == set(range(n))
    assert last is not None and last.text == f"NVRM: Xid storm line {n - 1}"
    host = nc.client.get("/api/v1/hosts/spark-01", headers=nc.admin).json()
    assert host["netconsole"]["received"] == n and host["netconsole"]["lost_msgid"] == 0

    def stats() -> dict[str, Any]:
        return dict(nc.client.get("/api/v1/netconsole", headers=nc.admin).json())

    wait_until(lambda: stats()["store_queue"] == 0, "the parse backlog to drain")
    assert stats()["datagrams"] == n and stats()["unparsed"] == 0


def kernel_events(c: Collector) -> list[dict[str, Any]]:
    r = c.client.get("/api/v1/hosts/spark-01/events", params={"kind": "xid"}, headers=c.admin)
    assert r.status_code == 200, r.text
    return r.json()["events"]


def kernel_alerts(c: Collector) -> list[Delivery]:
    with session(c) as s:
        return list(s.scalars(select(Delivery).where(Delivery.event == "kernel.event")))


@pytest.fixture
def nc_hooked(db_url: str) -> Iterator[Collector]:
    """A netconsole collector with one webhook target (deliveries are queued, never sent)."""
    yield from make_collector(
        db_url,
        netconsole_bind=f"{ME}:{free_udp_port()}",
        netconsole_fragment_timeout_s=0.3,
        webhook_urls="http://127.0.0.1:9/hook",
    )


@pytest.mark.parametrize("first", ["udp", "http"])
def test_a_kernel_record_from_both_channels_is_one_kernel_event(
    nc_hooked: Collector, first: str
) -> None:
    c = nc_hooked
    token = add_nc_host(c)
    agent_batch(c, token, [])  # the host's boot is known
    text = "NVRM: Xid (PCI:000f:01:00): 31, pid=4711, name=python3, Ch 00000008, MMU Fault"
    datagram = ext(900, body(text.encode(), msgid=1))
    if first == "udp":
        send(c, [datagram])
        wait_until(lambda: len(kernel_events(c)) == 1, "the netconsole record's kernel event")
        agent_batch(c, token, [kline(1, 900, text)])
    else:
        agent_batch(c, token, [kline(1, 900, text)])
        send(c, [datagram])
        wait_until(lambda: any(x.netconsole_received_at for x in nc_lines(c)), "the merge")
    events = kernel_events(c)
    assert len(events) == 1, events
    event = events[0]
    assert event["kind"] == "xid" and event["xid"] == 31 and event["pid"] == 4711
    assert event["pci"] == "000f:01:00"
    with session(c) as s:
        line = s.scalars(select(Line).where(Line.kseq == 900)).one()
        assert line.channels == 3
        assert s.scalar(select(func.count()).select_from(KernelEventRow)) == 1
        assert s.scalar(select(KernelEventRow.line_id)) == line.id
    # The GPU fault alerts once, from whichever channel classified it.
    alerts = kernel_alerts(c)
    assert len(alerts) == 1 and alerts[0].dedup_key == f"kernel.event:xid:31:000f:01:00:{line.id}"
    # A second, different Xid over netconsole only is a second event.
    send(c, [ext(901, body(b"NVRM: Xid (PCI:000f:01:00): 13, Graphics Exception", msgid=2))])
    wait_until(lambda: len(kernel_events(c)) == 2, "the second event")


@pytest.mark.parametrize("first", ["udp", "http"])
def test_a_fall_line_after_its_xid_79_is_one_fault_over_both_channels(
    nc_hooked: Collector, first: str
) -> None:
    """The driver's "GPU has fallen off the bus." right after the Xid 79 of its GPU restates
    it (real lines: tests/fixtures/real/kernel/t450s-...-across-boots.txt, 9 us apart):
    whichever channel brings either record first, one event and one alert."""
    c = nc_hooked
    token = add_nc_host(c)
    agent_batch(c, token, [])
    xid = (
        "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus."
    )
    fall = "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus."

    def live(kseq: int, text: str) -> dict[str, Any]:
        usec = {"_SOURCE_MONOTONIC_TIMESTAMP": str(1_000_000 + kseq)}  # as ext() stamps it
        return {**kline(kseq, kseq, text), "fields": usec}

    datagrams = [ext(k, body(t.encode(), msgid=k)) for k, t in ((900, xid), (901, fall))]
    if first == "udp":
        send(c, datagrams)
        wait_until(lambda: len(nc_lines(c)) == 2, "the netconsole records")
        agent_batch(c, token, [live(900, xid), live(901, fall)])
    else:
        agent_batch(c, token, [live(900, xid)])
        send(c, datagrams)
        wait_until(lambda: any(x.netconsole_received_at for x in nc_lines(c)), "the merge")
        agent_batch(c, token, [live(901, fall)])
    with session(c) as s:
        wait_until(lambda: all(x.channels == 3 for x in nc_lines(c)), "both channels' copies")
        assert [(e.kind, e.code) for e in s.scalars(select(KernelEventRow))] == [("xid", "79")]
    assert [a.dedup_key.rsplit(":", 1)[0] for a in kernel_alerts(c)] == [
        "kernel.event:xid:79:0000:01:00"
    ]


def test_a_plain_netconsole_line_is_classified_too(nc: Collector) -> None:
    token = add_nc_host(nc)
    agent_batch(nc, token, [])
    send(nc, [b"INFO: task python3:4242 blocked for more than 122 seconds.\n"])

    def hung() -> list[dict[str, Any]]:
        r = nc.client.get(
            "/api/v1/hosts/spark-01/events", params={"kind": "hung_task"}, headers=nc.admin
        )
        return r.json()["events"]

    wait_until(lambda: len(hung()) == 1, "the hung_task event")
    event = hung()[0]
    assert event["pid"] == 4242 and event["process"] == "python3"


def test_the_frozen_boots_journal_joins_the_copies_already_stored(nc_hooked: Collector) -> None:
    """After the reboot the agent's catch-up ships the frozen boot's journal: records without
    kseq (journald drops it), named by the kernel usec every channel carries. The ones the
    agent sent live are duplicates, the ones only netconsole brought gain the agent channel
    (one row, one kernel event, one alert), the ones nobody had are new."""
    c = nc_hooked
    token = add_nc_host(c)
    xid = "NVRM: Xid (PCI:000f:01:00): 79, pid=4242, name=vllm, GPU has fallen off the bus."
    texts = {1: "first", 2: "second", 3: "third", 4: "hung_task warning", 5: xid, 6: "last"}

    printed = time.time() - 10  # the host's clock: netconsole rows carry the collector's

    def usec(kseq: int) -> int:
        return 1_000_000 + kseq  # as ext() stamps it

    def live(kseq: int) -> dict[str, Any]:
        fields = {"_SOURCE_MONOTONIC_TIMESTAMP": str(usec(kseq))}
        return {**kline(kseq, kseq, texts[kseq], ts=printed + kseq), "fields": fields}

    def journal(kseq: int) -> dict[str, Any]:
        fields = {"_SOURCE_MONOTONIC_TIMESTAMP": str(usec(kseq)), "via": "journal"}
        line = {"seq": 1000 + kseq, "ts": printed + kseq + 0.002, "source": "kmsg"}
        return {**line, "priority": 3, "facility": 0, "text": texts[kseq], "fields": fields}

    agent_batch(c, token, [live(k) for k in (1, 2, 3)])
    # The agent goes silent; the kernel still prints over netconsole.
    send(c, [ext(k, body(texts[k].encode(), msgid=k)) for k in (4, 5)])
    wait_until(lambda: len(kernel_events(c)) == 1, "the netconsole Xid's kernel event")

    catchup = [journal(k) for k in (2, 3, 4, 5, 6)]
    result = agent_batch(c, token, catchup)
    assert result["stored"]["lines"] == 3 and result["duplicates"]["lines"] == 2
    rows = {line.text: line for line in nc_lines(c)}
    assert len(nc_lines(c)) == 6
    for k in (4, 5):  # netconsole's rows, now the agent's too
        row = rows[texts[k]]
        assert row.kseq == k and row.seq == 1000 + k and row.channels == 3
        assert row.netconsole_received_at is not None and row.agent_received_at is not None
    assert rows["last"].kseq is None and rows["last"].seq == 1006 and rows["last"].channels == 1
    assert rows["second"].seq == 2  # the live copy stays as it was
    assert len(kernel_events(c)) == 1 and len(kernel_alerts(c)) == 1

    replay = agent_batch(c, token, catchup)
    assert replay["stored"]["lines"] == 0 and replay["duplicates"]["lines"] == 5
    assert len(nc_lines(c)) == 6


def test_nul_and_overflowing_numbers_are_stored_not_dropped(nc: Collector) -> None:
    """Test inputs: a plain datagram with a raw NUL, a printed ``\\x00``, an Xid line whose
    numbers no 32-bit column holds, a header seq of 30 digits. All stored, none an error."""
    add_nc_host(nc)
    big = b"9" * 25
    send(
        nc,
        [
            b"plain \x00 console text\n",
            ext(20, body(b"printed \\x00 stays")),
            ext(21, body(b"NVRM: Xid (PCI:0000:01:00): " + big + b", pid=" + big + b", name=x")),
            b"6,%s,1000000,-;huge seq" % (b"9" * 30),
        ],
    )
    wait_until(lambda: len(nc_lines(nc)) == 4, "four records")
    lines = {line.text: line for line in nc_lines(nc)}
    assert lines["plain \\x00 console text"].escaped
    assert not lines["printed \\x00 stays"].escaped
    assert lines["huge seq"].kseq is None
    with session(nc) as s:
        events = list(s.scalars(select(KernelEventRow)))
    assert [(e.kind, e.xid, e.pid) for e in events] == [("xid", None, None)]
    stats = nc.client.get("/api/v1/netconsole", headers=nc.admin).json()
    assert stats["store_errors"] == 0, stats
