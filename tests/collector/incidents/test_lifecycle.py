"""Resolution on return (rebooted, agent_recovered, network_partition, stall), API and pages."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from collector import db
from collector.incidents import lifecycle as incidents
from collector.liveness import checker
from collector.liveness.collector_runs import settle_returned, start_collector_run
from collector.main import create_app
from collector.models import Artifact, Host, Incident
from collector.settings import Settings
from collector.timeutil import from_epoch, utcnow
from tests.collector.conftest import ADMIN_TOKEN, Collector
from tests.collector.freeze_support import BOOT_A, BOOT_B, factory, kline, post, sample

XID_79 = "NVRM: Xid (PCI:000f:01:00): 79, pid=4242, name=python3, GPU has fallen off the bus."


def lose(c: Collector, probes: list[dict[str, Any]] | None = None) -> int:
    opened = checker.check_heartbeats(
        factory(c),
        now=utcnow() + timedelta(seconds=c.settings.grace_s + 0.1),
        settings=c.settings,
        probe_runner=lambda _t: list(probes or []),
    )
    assert len(opened) == 1
    return opened[0]


def incident(c: Collector, incident_id: int) -> Incident:
    with db.session_scope(factory(c)) as s:
        row = s.get(Incident, incident_id)
        assert row is not None
        return row


def test_new_boot_resolves_rebooted_and_queues_postmortem(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01", samples=[sample(1, time.time())])
    iid = lose(collector)
    post(collector, token, "spark-01", boot=BOOT_B)
    row = incident(collector, iid)
    assert (row.kind, row.resolution, row.return_boot_id) == ("unreachable", "rebooted", BOOT_B)
    assert row.postmortem_state == "pending"


def test_previous_boot_catch_up_first_still_resolves_rebooted(collector: Collector) -> None:
    """After a reboot the agent first ships the old boot's journal tail (boot A records, sent
    from boot B): that is evidence about A, and the return is B's."""
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01", samples=[sample(1, time.time())])
    iid = lose(collector)
    catch_up = [
        {"seq": 900_001, "ts": time.time(), "source": "kmsg", "priority": 3, "text": "rcu stall"}
    ]
    post(collector, token, "spark-01", boot=BOOT_A, sender_boot=BOOT_B, lines=catch_up)
    row = incident(collector, iid)
    assert (row.resolution, row.return_boot_id) == ("rebooted", BOOT_B)
    post(collector, token, "spark-01", boot=BOOT_B)
    detail = collector.client.get("/api/v1/hosts/spark-01", headers=collector.admin).json()
    assert detail["boot_id"] == BOOT_B


def test_agent_down_on_same_boot_is_agent_recovered(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    ssh_ok = [{"name": "ssh", "ok": True, "detail": f"boot_id {BOOT_A}", "duration_s": 0.01}]
    iid = lose(collector, ssh_ok)
    assert incident(collector, iid).kind == "agent_down"
    post(collector, token, "spark-01")
    assert incident(collector, iid).resolution == "agent_recovered"


def test_replay_covering_the_gap_is_network_partition(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    t0 = time.time() - 30
    post(collector, token, "spark-01", samples=[sample(i, t0 + i) for i in range(1, 4)])
    iid = lose(collector)
    # Back: the spool replays the samples taken while the link was down, then live ones.
    post(collector, token, "spark-01", samples=[sample(i, t0 + i) for i in range(4, 31)])
    assert incident(collector, iid).state == "resolving"
    decided = incidents.settle_incidents(
        factory(collector), now=utcnow(), settings=collector.settings
    )
    assert decided == [iid]
    row = incident(collector, iid)
    assert (row.resolution, row.stall_s) == ("network_partition", None)


def back_with_a_hole(c: Collector) -> int:
    """A host without backlog reports, lost, back with samples that leave a 7.5 s hole in the
    gap (the replay could still close it): the incident."""
    token = c.add_host("spark-01")
    t0 = time.time() - 30
    post(c, token, "spark-01", samples=[sample(i, t0 + i) for i in range(1, 4)])
    iid = lose(c)
    post(c, token, "spark-01", samples=[sample(i, t0 + i + 6.5) for i in range(4, 10)])
    return iid


def test_samples_stopping_inside_the_gap_is_a_stall_with_its_length(collector: Collector) -> None:
    iid = back_with_a_hole(collector)
    sf, settings = factory(collector), collector.settings
    # Not yet: the replay could still close the hole.
    assert incidents.settle_incidents(sf, now=utcnow(), settings=settings) == []
    later = utcnow() + timedelta(seconds=settings.resolve_settle_s + 0.1)
    assert incidents.settle_incidents(sf, now=later, settings=settings) == [iid]
    row = incident(collector, iid)
    assert row.resolution == "stall"
    assert row.stall_s == pytest.approx(7.5)


def test_an_agent_without_backlog_reports_gets_the_settle_time_whatever_the_backlog_wait(
    collector: Collector,
) -> None:
    iid = back_with_a_hole(collector)
    sf = factory(collector)
    settings = collector.settings.model_copy(update={"resolve_backlog_max_s": 1.0})
    soon = utcnow() + timedelta(seconds=settings.resolve_settle_s / 2)
    assert incidents.settle_incidents(sf, now=soon, settings=settings) == []
    later = utcnow() + timedelta(seconds=settings.resolve_settle_s + 0.1)
    assert incidents.settle_incidents(sf, now=later, settings=settings) == [iid]
    assert incident(collector, iid).resolution == "stall"


def test_time_the_collector_was_down_is_not_time_the_replay_took(collector: Collector) -> None:
    """The host returned with a hole still open, then the collector restarted: the replay
    that could close the hole had no collector to reach. The settle time counts again from
    the start."""
    iid = back_with_a_hole(collector)
    sf, settings = factory(collector), collector.settings
    restart = utcnow() + timedelta(seconds=settings.resolve_settle_s)
    start_collector_run(sf, now=restart, settings=settings)
    almost = restart + timedelta(seconds=settings.resolve_settle_s - 0.5)
    assert settle_returned(sf, now=almost, settings=settings) == []
    later = restart + timedelta(seconds=settings.resolve_settle_s + 0.1)
    assert settle_returned(sf, now=later, settings=settings) == [iid]
    assert incident(collector, iid).resolution == "stall"


def lost_then_replaying(c: Collector) -> tuple[Any, int]:
    """A host that reports its backlog, lost: (``replay(a, b, backlog, shift=0)`` posting its
    samples a..b-1, ``shift`` s late, as a batch saying ``backlog`` is left; the incident)."""
    token = c.add_host("spark-01")
    t0 = time.time() - 60

    def replay(a: int, b: int, backlog: int, shift: float = 0.0) -> None:
        samples = [sample(i, t0 + i + shift) for i in range(a, b)]
        post(c, token, "spark-01", samples=samples, backlog=backlog)

    replay(1, 4, 0)
    return replay, lose(c)


def test_a_replay_still_under_way_decides_nothing_until_drained(collector: Collector) -> None:
    """An agent saying it still holds spool: neither stall nor partition until it is drained,
    however long that takes (up to resolve_backlog_max_s)."""
    replay, iid = lost_then_replaying(collector)
    sf, settings = factory(collector), collector.settings
    replay(4, 10, backlog=9000)  # the oldest part of the gap, more to come
    long_after = utcnow() + timedelta(seconds=settings.resolve_settle_s * 4)
    assert incidents.settle_incidents(sf, now=long_after, settings=settings) == []
    replay(10, 60, backlog=0)  # the rest, then the live stream: the gap was covered
    assert incidents.settle_incidents(sf, now=long_after, settings=settings) == [iid]
    assert incident(collector, iid).resolution == "network_partition"


def test_a_drained_replay_with_a_hole_is_a_stall_at_once(collector: Collector) -> None:
    replay, iid = lost_then_replaying(collector)
    sf, settings = factory(collector), collector.settings
    replay(4, 20, backlog=500)  # the first part is whole; the host stopped for 12 s further on
    replay(20, 40, backlog=0, shift=12)
    assert incidents.settle_incidents(sf, now=utcnow(), settings=settings) == [iid]
    row = incident(collector, iid)
    assert row.resolution == "stall" and row.stall_s == pytest.approx(13.0)


def test_incidents_api_and_pages(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    collector.add_host("spark-02")
    post(collector, token, "spark-01", samples=[sample(1, time.time())])
    iid = lose(collector)
    post(collector, token, "spark-01", boot=BOOT_B)
    api = collector.client
    listed = api.get(
        "/api/v1/incidents",
        params={"host": "spark-01", "kind": "unreachable"},
        headers=collector.admin,
    ).json()
    assert [i["id"] for i in listed] == [iid]
    assert (
        api.get("/api/v1/incidents", params={"host": "spark-02"}, headers=collector.admin).json()
        == []
    )
    assert (
        api.get(
            "/api/v1/incidents", params={"since": time.time() + 3600}, headers=collector.admin
        ).json()
        == []
    )
    detail = api.get(f"/api/v1/incidents/{iid}", headers=collector.admin).json()
    assert detail["resolution"] == "rebooted"
    assert [s["seq"] for s in detail["snapshot"]["samples"]] == [1]
    assert detail["artifacts"] == [] and detail["deliveries"] == []
    assert api.get("/api/v1/incidents/999", headers=collector.admin).status_code == 404
    # The pages render from these APIs in the browser (tests/browser checks what they show).
    for page in ("/freezes", f"/incidents/{iid}"):
        assert api.get(page, headers=collector.admin).status_code == 200


def open_incident_of(c: Collector, host: str) -> dict[str, Any] | None:
    hosts = c.client.get("/api/v1/hosts", headers=c.admin).json()
    return next(h["open_incident"] for h in hosts if h["name"] == host)


def test_incident_views_carry_what_the_pages_draw(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    with db.session_scope(factory(collector)) as s:
        s.scalars(select(Host).where(Host.name == "spark-01")).one().simulated = True
    t_last = time.time()
    samples = [sample(i, t_last - 30 + i) for i in range(1, 31)]
    post(collector, token, "spark-01", samples=samples, lines=[kline(1, t_last - 2.5, XID_79)])
    iid = lose(collector, [{"name": "vllm", "ok": False, "detail": "refused", "duration_s": 0.01}])
    api, admin = collector.client, collector.admin

    row = incident(collector, iid)
    assert open_incident_of(collector, "spark-01") == {
        "id": iid,
        "kind": "unreachable",
        "state": "open",
        "since": row.last_heartbeat_at.timestamp(),
        "url": f"/incidents/{iid}",
    }
    (listed,) = api.get("/api/v1/incidents", headers=admin).json()
    assert (listed["simulated"], listed["url"], listed["end"]) == (True, f"/incidents/{iid}", None)
    assert listed["start"] == row.last_heartbeat_at.timestamp()

    post(collector, token, "spark-01", boot=BOOT_B)
    assert open_incident_of(collector, "spark-01") is None
    detail = api.get(f"/api/v1/incidents/{iid}", headers=admin).json()
    row = incident(collector, iid)
    assert detail["end"] == row.returned_at.timestamp()
    assert detail["downtime_s"] == pytest.approx(detail["end"] - detail["start"], abs=0.01)
    # The window is the snapshot's, on the agent's clock: 120 s up to its last sample, +5 s.
    assert detail["window"] == {"since": t_last - 120, "until": t_last + 5}
    assert [(m["kind"], m["ts"]) for m in detail["markers"]] == [("xid", t_last - 2.5)]
    assert detail["probes"][0]["name"] == "vllm"


def test_artifacts_are_served_inline_or_as_a_download(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01", samples=[sample(1, time.time())])
    iid = lose(collector)
    post(collector, token, "spark-01", boot=BOOT_B)
    with db.session_scope(factory(collector)) as s:
        s.add(Artifact(incident_id=iid, name="pstore/dmesg-ramoops-0", stdout=b"Oops\n",
                       argv=["cat", "/sys/fs/pstore/dmesg-ramoops-0"], exit_status=0))  # fmt: skip
    api, admin = collector.client, collector.admin
    (artifact,) = api.get(f"/api/v1/incidents/{iid}", headers=admin).json()["artifacts"]
    assert artifact["url"] == f"/api/v1/incidents/{iid}/artifacts/pstore/dmesg-ramoops-0"
    inline = api.get(artifact["url"], headers=admin)
    assert (inline.status_code, inline.text) == (200, "Oops\n")
    assert inline.headers["content-disposition"].startswith("inline;")
    download = api.get(artifact["url"], params={"download": "1"}, headers=admin)
    assert download.text == "Oops\n" and download.headers["x-exit-status"] == "0"
    assert download.headers["content-disposition"] == (
        f'attachment; filename="incident-{iid}-pstore-dmesg-ramoops-0.txt"; '
        f"filename*=UTF-8''incident-{iid}-pstore-dmesg-ramoops-0.txt"
    )
    missing = api.get(f"/api/v1/incidents/{iid}/artifacts/nope", headers=admin)
    assert missing.status_code == 404


def test_patch_host_sets_probe_settings(collector: Collector, tmp_path: Path) -> None:
    collector.add_host("spark-01")
    key = tmp_path / "id_ed25519"
    key.write_text("a key file the collector can read\n")
    r = collector.client.patch(
        "/api/v1/hosts/spark-01",
        json={
            "ssh": "fw@10.0.0.5:2222",
            "ssh_key_path": str(key),
            "vllm_url": "http://x:8000",
            "grace_s": 5,
            "restart_agent": True,
            "ssh_host_key": "ssh-ed25519 AAAA",
        },
        headers=collector.admin,
    )
    assert r.status_code == 200, r.text
    assert r.json()["config"] == {
        "ssh": "fw@10.0.0.5:2222",
        "ssh_key_path": str(key),
        "ssh_host_key": "ssh-ed25519 AAAA",
        "vllm_url": "http://x:8000",
        "grace_s": 5.0,
        "restart_agent": True,
        "paused": False,
        "power": None,
        "retention": {},
    }
    bad = collector.client.patch(
        "/api/v1/hosts/spark-01", json={"ssh": "nouser"}, headers=collector.admin
    )
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "ssh"]
    with db.session_scope(factory(collector)) as s:
        assert s.scalar(select(Incident.id)) is None


def test_a_replay_ending_where_the_host_froze_waits_for_a_live_sample(
    collector: Collector,
) -> None:
    """The agent was frozen (SIGSTOP) while the collector was away: its spool replay, received
    after the return and drained, runs without a hole up to the freeze. The stretch from there
    to the return is not covered by it: a stall once a live sample shows the hole, never a
    partition decided before that sample is stored."""
    token = collector.add_host("spark-01")
    t0 = time.time() - 60
    sf, settings = factory(collector), collector.settings

    def send(first: int, last: int, *, backlog: int) -> None:
        samples = [sample(i, t0 + i) for i in range(first, last + 1)]
        post(collector, token, "spark-01", samples=samples, backlog=backlog, sent_at=time.time())

    send(1, 3, backlog=0)
    iid = lose(collector)
    send(4, 20, backlog=0)  # the spool: taken up to the freeze, 40 s before the return
    assert incidents.settle_incidents(sf, now=utcnow(), settings=settings) == []
    send(60, 60, backlog=0)  # the first live sample after the return
    assert incidents.settle_incidents(sf, now=utcnow(), settings=settings) == [iid]
    row = incident(collector, iid)
    assert row.resolution == "stall" and row.stall_s == pytest.approx(40.0)


def test_a_partition_replay_with_sent_at_is_still_a_partition_at_once(
    collector: Collector,
) -> None:
    """The link was down, the agent sampled on: its drained replay reaches the return."""
    token = collector.add_host("spark-01")
    t0 = time.time() - 30
    post(collector, token, "spark-01", samples=[sample(i, t0 + i) for i in range(1, 4)],
         backlog=0, sent_at=time.time())  # fmt: skip
    iid = lose(collector)
    post(collector, token, "spark-01", samples=[sample(i, t0 + i) for i in range(4, 30)],
         backlog=0, sent_at=time.time())  # fmt: skip
    assert incidents.settle_incidents(
        factory(collector), now=utcnow(), settings=collector.settings
    ) == [iid]
    assert incident(collector, iid).resolution == "network_partition"


def back_by_a_late_post(c: Collector) -> tuple[str, float, int]:
    """A host reporting its backlog, lost, back by a POST sent before the cut and delivered
    late (its sample and backlog from then): (its token, the samples' time base, the
    incident)."""
    token = c.add_host("spark-01")
    t0 = time.time() - 30
    post(c, token, "spark-01", samples=[sample(i, t0 + i) for i in range(1, 4)],
         backlog=0, sent_at=time.time())  # fmt: skip
    iid = lose(c)
    post(c, token, "spark-01", samples=[sample(4, t0 + 4)], backlog=0, sent_at=t0 + 4)
    return token, t0, iid


def test_a_late_post_ending_the_silence_waits_for_the_agent_s_next_batch(
    collector: Collector,
) -> None:
    """The batch that ends the silence is a POST sent before the link went down, resent by
    TCP once it came back: its samples and its backlog (none) are from before the cut. The
    agent's next batch, however late, decides: no stall is called in the meantime."""
    token, t0, iid = back_by_a_late_post(collector)
    sf, settings = factory(collector), collector.settings
    long_after = utcnow() + timedelta(seconds=settings.resolve_settle_s * 4)
    assert incidents.settle_incidents(sf, now=long_after, settings=settings) == []
    # The next batch: the spool it sends covers the cut, up to a sample taken now.
    post(collector, token, "spark-01", samples=[sample(i, t0 + i) for i in range(5, 31)],
         backlog=0, sent_at=time.time())  # fmt: skip
    assert incidents.settle_incidents(sf, now=long_after, settings=settings) == [iid]
    assert incident(collector, iid).resolution == "network_partition"


def test_a_late_post_and_then_nothing_is_a_stall_once_the_backlog_wait_is_over(
    collector: Collector,
) -> None:
    _token, _t0, iid = back_by_a_late_post(collector)
    sf, settings = factory(collector), collector.settings
    almost = utcnow() + timedelta(seconds=settings.resolve_backlog_max_s - 1)
    assert incidents.settle_incidents(sf, now=almost, settings=settings) == []
    over = utcnow() + timedelta(seconds=settings.resolve_backlog_max_s + 0.1)
    assert incidents.settle_incidents(sf, now=over, settings=settings) == [iid]
    assert incident(collector, iid).resolution == "stall"


@dataclass
class Clocked:
    """A collector whose ingest reads ``at[0]`` as its clock, and the host it watches."""

    c: Collector
    at: list[float]
    token: str

    def send(self, when: float, stamps: list[float], *, sent: float | None = None) -> None:
        """A batch received at T0 + ``when``, sent at T0 + ``sent`` (default: ``when``), with
        samples taken at T0 + each of ``stamps`` (the agent's clock is the collector's)."""
        self.at[0] = T0 + when
        samples = [sample(int(s * 10), T0 + s) for s in stamps]
        sent_at = T0 + (when if sent is None else sent)
        post(self.c, self.token, "spark-01", samples=samples, backlog=0, sent_at=sent_at)

    def lose(self, when: float) -> int:
        opened = checker.check_heartbeats(
            factory(self.c), now=from_epoch(T0 + when), settings=self.c.settings,
            probe_runner=lambda _t: [],
        )  # fmt: skip
        assert len(opened) == 1
        return opened[0]

    def settle(self, when: float) -> list[int]:
        return incidents.settle_incidents(
            factory(self.c), now=from_epoch(T0 + when), settings=self.c.settings
        )

    def cut_twice(self) -> tuple[int, int]:
        """A sample a second to 9 s; the link down at 10 s, back at 30 s just long enough for
        the POST held up in the cut to arrive, down again: (the two incidents)."""
        for s in range(1, 10):
            self.send(s, [s])
        first = self.lose(13.1)
        self.send(30, [10], sent=10)  # the late POST
        return first, self.lose(33.1)


T0 = 1_800_000_000.0


@pytest.fixture
def clocked(db_url: str) -> Iterator[Clocked]:
    at = [T0]
    settings = Settings(db_url=db_url, admin_token=ADMIN_TOKEN, run_scheduler=False)
    with TestClient(create_app(settings, clock=lambda: at[0])) as client:
        c = Collector(client=client, settings=settings)
        yield Clocked(c, at, c.add_host("spark-01"))


def test_a_later_silence_does_not_decide_an_incident_still_settling(clocked: Clocked) -> None:
    """The link went down at 10 s and came back at 30 s just long enough for the POST held up
    in the cut to arrive (incident 1 settles, waiting for the next batch), then went down
    again (incident 2). The host froze from 45 to 55 s in the second cut; the replay at 60 s
    covers the first cut whole. Incident 1 was a partition: the freeze is incident 2's."""
    h = clocked
    first, second = h.cut_twice()
    assert h.settle(36) == []
    h.send(60, [s for s in range(11, 61) if not 45 <= s < 55])  # spool, then live
    assert sorted(h.settle(60)) == [first, second]
    assert (incident(h.c, first).resolution, incident(h.c, first).stall_s) == (
        "network_partition", None,
    )  # fmt: skip
    assert incident(h.c, second).resolution == "stall"
    assert incident(h.c, second).stall_s == pytest.approx(11.0)


def test_time_the_host_is_silent_again_is_not_time_the_replay_took(clocked: Clocked) -> None:
    """As above, but the second cut outlasts resolve_backlog_max_s (300 s): while the host is
    silent again no batch of it can come, so that time is not time its replay took. Incident 1
    stays settling until the replay that ends the second cut, which decides both."""
    h = clocked
    first, second = h.cut_twice()
    assert h.settle(400) == []  # 370 s after the first return, silent since 30 s
    h.send(400, list(range(11, 401, 2)))  # the spool covers both cuts, then live
    assert sorted(h.settle(400)) == [first, second]
    assert (incident(h.c, first).resolution, incident(h.c, first).stall_s) == (
        "network_partition", None,
    )  # fmt: skip
    assert incident(h.c, second).resolution == "network_partition"
