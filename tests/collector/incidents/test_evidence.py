"""What an incident learns after it opened: the kernel still printing over netconsole while the
agent was silent, and the frozen boot's catch-up (journal tail, pstore) shipped after a reboot."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from agent.wire import INGEST_PATH
from collector import db
from collector.liveness import checker
from collector.models import CollectorRun, Delivery, Host, Incident
from collector.netconsole.parse import NetconsoleRecord
from collector.netconsole.records import ReceivedRecord
from collector.netconsole.store import NetconsoleStore
from collector.timeutil import utcnow
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import BOOT_A, BOOT_B, factory, sample

HOST = "spark-01"


@pytest.fixture
def c(db_url: str) -> Iterator[Collector]:
    """A collector with one webhook target: deliveries are queued (and inspected), never sent."""
    yield from make_collector(db_url, webhook_urls="http://127.0.0.1:9/hook")


def post(
    c: Collector,
    token: str,
    *,
    boot: str,
    agent_boot: str | None = None,
    samples: list[dict[str, Any]] | None = None,
    lines: list[dict[str, Any]] | None = None,
) -> None:
    agent: dict[str, Any] = {"version": "test", "pid": 1, "started_at": 1.0}
    if agent_boot is not None:
        agent["boot_id"] = agent_boot
    body = {"host": HOST, "boot_id": boot, "agent": agent, "samples": samples or []}
    body["lines"] = lines or []
    r = c.client.post(
        INGEST_PATH, content=json.dumps(body), headers={"Authorization": f"Bearer {token}"}
    )
    assert r.status_code == 200, r.text


def backdate_heartbeat(c: Collector, seconds: float) -> float:
    """Move the host's last heartbeat ``seconds`` into the past; returns it (epoch s). The
    collector was up then (a silence of a collector that was down would hold its alert)."""
    then = utcnow() - timedelta(seconds=seconds)
    with db.session_scope(factory(c)) as s:
        s.execute(update(Host).values(last_seen_at=then, overdue_at=then + timedelta(seconds=3)))
        s.execute(update(CollectorRun).values(started_at=then - timedelta(seconds=1)))
    return then.timestamp()


def lose(c: Collector) -> int:
    """Open the incident now (the heartbeat must be overdue: see ``backdate_heartbeat``)."""
    opened = checker.check_heartbeats(
        factory(c), now=utcnow(), settings=c.settings, probe_runner=lambda _t: []
    )
    assert len(opened) == 1
    return opened[0]


def netconsole(c: Collector, kseq: int, at: float, text: str, boot: str = BOOT_A) -> None:
    """A netconsole record arriving at ``at`` (stored the way the receiver's parse thread does)."""
    host_id = host_row(c).id
    record = NetconsoleRecord(
        kseq=kseq, level=4, facility=0, usec=kseq * 1000, text=text, boot=boot
    )
    store = NetconsoleStore(factory(c), settings=c.settings)
    store.on_records([ReceivedRecord(str(host_id), ("127.0.0.1", 6666), at, record)])


def host_row(c: Collector) -> Host:
    with db.session_scope(factory(c)) as s:
        return s.scalars(select(Host).where(Host.name == HOST)).one()


def detail(c: Collector, incident_id: int) -> dict[str, Any]:
    r = c.client.get(f"/api/v1/incidents/{incident_id}", headers=c.admin)
    assert r.status_code == 200, r.text
    return r.json()


def delivered(c: Collector, event: str) -> dict[str, Any]:
    with db.session_scope(factory(c)) as s:
        row = s.scalars(select(Delivery).where(Delivery.event == event)).one()
        return json.loads(row.body)


def test_kernel_alive_after_the_last_heartbeat(c: Collector) -> None:
    token = c.add_host(HOST)
    post(c, token, boot=BOOT_A, samples=[sample(1, time.time())])
    hb = backdate_heartbeat(c, 60)
    # An agent-channel line of the same second does not count; the kernel's own lines do.
    netconsole(c, 10, hb + 2.0, "rcu: INFO: rcu_sched self-detected stall on CPU")
    iid = lose(c)
    opened = delivered(c, "incident.opened")
    assert opened["incident"]["kernel_alive"] == {
        "last_netconsole_at": pytest.approx(hb + 2.0),
        "seconds_after_last_heartbeat": 2.0,
    }
    netconsole(c, 11, hb + 14.0, "watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [python3:4711]")
    alive = detail(c, iid)["kernel_alive"]
    assert alive == {
        "last_netconsole_at": pytest.approx(hb + 14.0),
        "seconds_after_last_heartbeat": 14.0,
    }

    post(c, token, boot=BOOT_B)  # back after a power cycle
    resolved = delivered(c, "incident.resolved")
    assert resolved["incident"]["resolution"] == "rebooted"
    assert resolved["incident"]["kernel_alive"]["seconds_after_last_heartbeat"] == 14.0
    # Lines after the return are the new boot talking, not the frozen one.
    netconsole(c, 1, time.time() + 5, "Linux version 6.11.0-1016-nvidia", boot=BOOT_B)
    assert detail(c, iid)["kernel_alive"]["seconds_after_last_heartbeat"] == 14.0
    # The soft lockup went through kernel-event classification like an agent line.
    r = c.client.get(
        f"/api/v1/hosts/{HOST}/events", params={"kind": "soft_lockup"}, headers=c.admin
    )
    assert [e["pid"] for e in r.json()["events"]] == [4711]


def test_no_netconsole_line_after_the_heartbeat_is_no_kernel_alive(c: Collector) -> None:
    token = c.add_host(HOST)
    post(c, token, boot=BOOT_A)
    hb = backdate_heartbeat(c, 60)
    netconsole(c, 10, hb - 1.0, "a line before the heartbeat")
    iid = lose(c)
    assert "kernel_alive" not in delivered(c, "incident.opened")["incident"]
    assert detail(c, iid)["kernel_alive"] is None


def catchup_lines(ts: float) -> list[dict[str, Any]]:
    """What agent.catchup ships for the frozen boot: its journal tail and a pstore file."""
    usec = {"_SOURCE_MONOTONIC_TIMESTAMP": "912345678", "via": "journal"}
    pstore = {"pstore_file": "dmesg-efi-176440000101001", "pstore_dir": "/sys/fs/pstore"}
    return [
        {"seq": 100, "ts": ts, "source": "kmsg", "priority": 3, "fields": usec,
         "text": "NVRM: Xid (PCI:000f:01:00): 119, pid=3849, name=python3, Timeout after 45s"},
        {"seq": 101, "ts": ts + 1, "source": "journal", "priority": 0,
         "fields": {**pstore, "line_no": 1}, "text": "Panic#1 Part1"},
        {"seq": 102, "ts": ts + 1, "source": "journal", "priority": 0,
         "fields": {**pstore, "line_no": 2}, "text": "Kernel panic - not syncing: hung_task"},
    ]  # fmt: skip


def current_boot(c: Collector) -> str | None:
    return host_row(c).current_boot_id


@pytest.mark.parametrize("agent_boot", [BOOT_B, None], ids=["catchup", "old-agent"])
def test_the_frozen_boots_catchup_reaches_its_incident(
    c: Collector, agent_boot: str | None
) -> None:
    token = c.add_host(HOST)
    post(c, token, boot=BOOT_A, samples=[sample(1, time.time())])
    backdate_heartbeat(c, 60)
    iid = lose(c)
    post(c, token, boot=BOOT_B)
    assert detail(c, iid)["resolution"] == "rebooted"
    assert current_boot(c) == BOOT_B

    post(c, token, boot=BOOT_A, agent_boot=agent_boot, lines=catchup_lines(time.time() - 40))
    assert current_boot(c) == BOOT_B  # an old boot's batch never moves the host back
    host = host_row(c)
    assert host.status == "up"
    info = detail(c, iid)
    assert [x["text"][:20] for x in info["late_evidence"]] == [
        "NVRM: Xid (PCI:000f:",
        "Panic#1 Part1",
        "Kernel panic - not s",
    ]
    assert info["late_evidence"][1]["fields"]["pstore_file"] == "dmesg-efi-176440000101001"
    # Its Xid is a kernel event of the frozen boot (and a GPU-fault alert).
    r = c.client.get(f"/api/v1/hosts/{HOST}/events", params={"kind": "xid"}, headers=c.admin)
    assert [e["xid"] for e in r.json()["events"]] == [119]
    # The new boot keeps being the present.
    post(c, token, boot=BOOT_B)
    assert current_boot(c) == BOOT_B


@pytest.mark.parametrize("agent_boot", [BOOT_B, None], ids=["catchup", "spool-replay"])
def test_the_old_boot_arriving_first_still_resolves_rebooted(
    c: Collector, agent_boot: str | None
) -> None:
    """The agent ships the frozen boot's catch-up (or spool) before its live stream."""
    token = c.add_host(HOST)
    post(c, token, boot=BOOT_A, samples=[sample(1, time.time())])
    backdate_heartbeat(c, 60)
    iid = lose(c)
    post(c, token, boot=BOOT_A, agent_boot=agent_boot, lines=catchup_lines(time.time() - 40))
    if agent_boot is None:  # nothing says the agent rebooted yet
        with db.session_scope(factory(c)) as s:
            row = s.get(Incident, iid)
            assert row is not None and row.state == "resolving"
        assert current_boot(c) == BOOT_A
    post(c, token, boot=BOOT_B, samples=[sample(1, time.time())])
    info = detail(c, iid)
    assert (info["resolution"], info["return_boot_id"]) == ("rebooted", BOOT_B)
    assert info["postmortem"]["state"] == "pending"
    assert current_boot(c) == BOOT_B
    assert len(info["late_evidence"]) == 3


def test_same_boot_return_keeps_only_lines_from_inside_the_silence(c: Collector) -> None:
    token = c.add_host(HOST)
    post(c, token, boot=BOOT_A, samples=[sample(1, time.time())])
    backdate_heartbeat(c, 60)
    iid = lose(c)
    returned_at = time.time()
    inside = {"seq": 5, "ts": returned_at - 2, "source": "kmsg", "kseq": 5, "text": "in the gap"}
    post(c, token, boot=BOOT_A, lines=[inside])
    later = {"seq": 6, "ts": returned_at + 30, "source": "kmsg", "kseq": 6, "text": "much later"}
    post(c, token, boot=BOOT_A, lines=[later])
    info = detail(c, iid)
    assert info["resolution"] is None or info["resolution"] != "rebooted"
    assert [x["text"] for x in info["late_evidence"]] == ["in the gap"]
