"""The checker's steps with an injected clock, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from functools import partial
from typing import Any

import httpx
import pytest
import time_machine
from sqlalchemy import func, select

from collector import db
from collector.alerts import delivery as webhooks
from collector.incidents import lifecycle as incidents
from collector.liveness import checker
from collector.liveness.arrivals import Arrivals
from collector.liveness.collector_runs import release_held_alerts
from collector.models import CollectorRun, Delivery, Host, Incident, IncidentSnapshot
from collector.timeutil import utcnow
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import BOOT_A, factory, kline, post, receiver, sample


def no_probes(_target: Any) -> list[dict[str, Any]]:
    return []


def test_overdue_host_goes_lost_with_unreachable_incident_and_snapshot(
    collector: Collector,
) -> None:
    token = collector.add_host("spark-01")
    t0 = time.time()
    post(
        collector,
        token,
        "spark-01",
        samples=[sample(1, t0 - 1), sample(2, t0)],
        lines=[kline(1, t0, "NVRM: GPU at PCI:000f:01:00: GPU has fallen off the bus.")],
    )
    sf = factory(collector)
    now = utcnow()
    assert (
        checker.check_heartbeats(sf, now=now, settings=collector.settings, probe_runner=no_probes)
        == []
    )
    later = now + timedelta(seconds=collector.settings.grace_s + 0.1)
    opened = checker.check_heartbeats(
        sf, now=later, settings=collector.settings, probe_runner=no_probes
    )
    assert len(opened) == 1
    # Idempotent: a second sweep finds nothing to do.
    assert (
        checker.check_heartbeats(sf, now=later, settings=collector.settings, probe_runner=no_probes)
        == []
    )
    with db.session_scope(sf) as s:
        host = s.scalar(select(Host).where(Host.name == "spark-01"))
        incident = s.get(Incident, opened[0])
        snapshot = s.get(IncidentSnapshot, opened[0])
        assert host is not None and incident is not None and snapshot is not None
        assert host.status == "lost"
        assert (incident.kind, incident.state, incident.boot_id) == ("unreachable", "open", BOOT_A)
        assert incident.last_sample_ts == pytest.approx(t0)
        assert [x["seq"] for x in snapshot.samples] == [1, 2]
        assert "fallen off the bus" in snapshot.lines[0]["text"]


def test_heartbeat_within_grace_keeps_host_up(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    sf = factory(collector)
    with time_machine.travel(utcnow(), tick=False) as clock:
        for _ in range(5):
            post(collector, token, "spark-01")
            clock.shift(collector.settings.grace_s * 0.8)
            assert (
                checker.check_heartbeats(
                    sf, now=utcnow(), settings=collector.settings, probe_runner=no_probes
                )
                == []
            )
    with db.session_scope(sf) as s:
        assert s.scalar(select(Host.status)) == "up"


def subscribe(c: Collector, rec: Any) -> None:
    r = c.client.post(
        "/api/v1/webhooks", json={"url": rec.url, "secret": rec.secret}, headers=c.admin
    )
    assert r.status_code == 201


def test_collector_restart_raises_no_false_alarm_but_reports_dead_host(sqlite_url: str) -> None:
    with receiver() as rec, time_machine.travel(utcnow(), tick=False) as clock:
        gen = make_collector(sqlite_url)
        first = next(gen)
        subscribe(first, rec)
        tokens = {name: first.add_host(name) for name in ("alive", "slow", "dead")}
        for name, token in tokens.items():
            post(first, token, name)
        gen.close()  # collector stops; all hosts were up
        clock.shift(600)  # down for ten minutes; "dead" died meanwhile

        gen = make_collector(sqlite_url)
        second = next(gen)
        sf, settings = factory(second), second.settings
        startup = settings.agent_retry_max_s + settings.grace_s
        with db.session_scope(sf) as s:
            runs = list(s.scalars(select(CollectorRun).order_by(CollectorRun.id)))
            assert runs[-1].down_since == runs[0].stopped_at
            assert (
                s.scalar(select(func.count()).select_from(Host).where(Host.status == "unknown"))
                == 3
            )
        sweep = partial(checker.check_heartbeats, sf, settings=settings, probe_runner=no_probes)
        assert sweep(now=utcnow()) == []
        clock.shift(settings.grace_s / 2)
        post(second, tokens["alive"], "alive")
        clock.shift(startup - settings.grace_s / 2 - 0.1)  # an agent at its longest retry wait
        post(second, tokens["alive"], "alive")
        assert sweep(now=utcnow()) == []
        post(second, tokens["slow"], "slow")
        clock.shift(0.2)
        opened = sweep(now=utcnow())
        assert len(opened) == 1
        with db.session_scope(sf) as s:
            incident = s.get(Incident, opened[0])
            assert incident is not None
            host = s.get(Host, incident.host_id)
            assert host is not None and host.name == "dead"
            assert incident.collector_down is True and incident.alert_held_until is not None
        with httpx.Client() as http:
            deliver = partial(webhooks.deliver_due_alerts, sf, http_client=http, settings=settings)
            assert release_held_alerts(sf, now=utcnow(), settings=settings) == []
            deliver(now=utcnow())
            assert rec.received == []  # held: the host may still be reconnecting
            clock.shift(settings.restart_alert_hold_s)
            assert release_held_alerts(sf, now=utcnow(), settings=settings) == opened
            deliver(now=utcnow())
        assert rec.events() == ["incident.opened"]  # still silent well after the start
        gen.close()


def test_a_host_back_before_its_held_alert_never_alerts(sqlite_url: str) -> None:
    with receiver() as rec, time_machine.travel(utcnow(), tick=False) as clock:
        gen = make_collector(sqlite_url)
        first = next(gen)
        subscribe(first, rec)
        token = first.add_host("late-agent")
        post(first, token, "late-agent")
        gen.close()
        clock.shift(20)
        gen = make_collector(sqlite_url)
        second = next(gen)
        sf, settings = factory(second), second.settings
        clock.shift(settings.agent_retry_max_s + settings.grace_s + 1)  # slower than any retry
        (opened,) = checker.check_heartbeats(
            sf, now=utcnow(), settings=settings, probe_runner=no_probes
        )
        clock.shift(2)
        post(second, token, "late-agent")  # back on the same boot, within the hold
        clock.shift(settings.resolve_settle_s + 1)
        incidents.settle_incidents(sf, now=utcnow(), settings=settings)
        clock.shift(settings.restart_alert_hold_s)
        assert release_held_alerts(sf, now=utcnow(), settings=settings) == []
        with httpx.Client() as http:
            webhooks.deliver_due_alerts(sf, now=utcnow(), http_client=http, settings=settings)
        with db.session_scope(sf) as s:
            incident = s.get(Incident, opened)
            assert incident is not None and incident.state == "resolved"
            assert s.scalar(select(func.count()).select_from(Delivery)) == 0
        assert rec.received == []
        gen.close()


def test_agent_stopping_is_planned_silence_without_alert(collector: Collector) -> None:
    with receiver() as rec:
        collector.client.post("/api/v1/webhooks", json={"url": rec.url}, headers=collector.admin)
        token = collector.add_host("spark-01")
        sf = factory(collector)
        post(
            collector,
            token,
            "spark-01",
            started_at=time.time() - 5,
            events=[
                {"seq": 1, "ts": time.time(), "kind": "agent_stopping", "data": {"shutdown": True}}
            ],
        )
        later = utcnow() + timedelta(seconds=10)
        opened = checker.check_heartbeats(
            sf, now=later, settings=collector.settings, probe_runner=no_probes
        )
        post(collector, token, "spark-01", boot="new-boot-after-planned-reboot")
        with db.session_scope(sf) as s:
            incident = s.get(Incident, opened[0])
            assert incident is not None
            assert (incident.kind, incident.shutdown) == ("planned", True)
            assert incident.resolution == "planned_reboot"
            assert s.scalar(select(func.count()).select_from(Delivery)) == 0


def test_replayed_stop_of_a_previous_agent_is_not_intent(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    sf = factory(collector)
    post(
        collector,
        token,
        "spark-01",
        started_at=time.time(),
        events=[{"seq": 1, "ts": time.time() - 100, "kind": "agent_stopping", "data": {}}],
    )
    opened = checker.check_heartbeats(
        sf,
        now=utcnow() + timedelta(seconds=10),
        settings=collector.settings,
        probe_runner=no_probes,
    )
    with db.session_scope(sf) as s:
        incident = s.get(Incident, opened[0])
        assert incident is not None and incident.kind == "unreachable"


def test_paused_host_silence_is_paused_then_watched_again(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    sf = factory(collector)
    post(collector, token, "spark-01")
    r = collector.client.patch(
        "/api/v1/hosts/spark-01", json={"paused": True}, headers=collector.admin
    )
    assert r.status_code == 200 and r.json()["paused"] is True
    later = utcnow() + timedelta(seconds=10)
    opened = checker.check_heartbeats(
        sf, now=later, settings=collector.settings, probe_runner=no_probes
    )
    r = collector.client.patch(
        "/api/v1/hosts/spark-01", json={"paused": False}, headers=collector.admin
    )
    with db.session_scope(sf) as s:
        incident = s.get(Incident, opened[0])
        assert incident is not None
        assert (incident.kind, incident.resolution) == ("paused", "unpaused")
        assert s.scalar(select(Host.status)) == "unknown"
        assert s.scalar(select(func.count()).select_from(Delivery)) == 0


def test_probing_host_that_returns_meanwhile_opens_nothing(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    sf = factory(collector)
    post(collector, token, "spark-01")

    def probe_while_host_returns(_target: Any) -> list[dict[str, Any]]:
        post(collector, token, "spark-01")
        return []

    later = utcnow() + timedelta(seconds=10)
    assert (
        checker.check_heartbeats(
            sf, now=later, settings=collector.settings, probe_runner=probe_while_host_returns
        )
        == []
    )
    with db.session_scope(sf) as s:
        assert s.scalar(select(Host.status)) == "up"


def test_two_checkers_on_postgres_alert_exactly_once(fresh_postgres_url: str) -> None:
    with receiver() as rec:
        gen = make_collector(fresh_postgres_url)
        c = next(gen)
        c.client.post(
            "/api/v1/webhooks", json={"url": rec.url, "secret": rec.secret}, headers=c.admin
        )
        tokens = [c.add_host(f"spark-{i}") for i in range(4)]
        for i, token in enumerate(tokens):
            post(c, token, f"spark-{i}")
        engines = [db.make_engine(fresh_postgres_url) for _ in range(2)]
        factories = [db.make_sessionmaker(e) for e in engines]
        later = utcnow() + timedelta(seconds=10)
        opened: list[int] = []
        barrier = threading.Barrier(2)

        def slow_probes(_target: Any) -> list[dict[str, Any]]:
            time.sleep(0.05)
            return []

        def sweep(sf: Any) -> None:
            barrier.wait()
            opened.extend(
                checker.check_heartbeats(
                    sf, now=later, settings=c.settings, probe_runner=slow_probes
                )
            )
            barrier.wait()
            with webhooks_client() as http:
                webhooks.deliver_due_alerts(
                    sf, now=later + timedelta(seconds=1), http_client=http, settings=c.settings
                )

        threads = [threading.Thread(target=sweep, args=(sf,)) for sf in factories]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for e in engines:
            e.dispose()
        assert sorted(opened) == sorted(set(opened)) and len(opened) == 4
        assert sorted(rec.events()) == ["incident.opened"] * 4
        assert len(set(rec.ids())) == 4 and rec.bad_signatures == 0
        gen.close()


def webhooks_client() -> Any:
    return httpx.Client()


def test_a_batch_in_hand_is_a_heartbeat_while_it_waits_to_be_stored(collector: Collector) -> None:
    """Under load a batch may wait seconds for the database; its host is not silent."""
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    sf, settings = factory(collector), collector.settings
    arrivals = Arrivals()
    with db.session_scope(sf) as s:
        host_id = s.scalar(select(Host.id))
    later = utcnow() + timedelta(seconds=settings.grace_s + 1)
    sweep = partial(
        checker.check_heartbeats, sf, settings=settings, probe_runner=no_probes, arrivals=arrivals
    )
    with arrivals.holding(host_id):
        assert sweep(now=later) == []
        with db.session_scope(sf) as s:
            assert s.scalar(select(Host.status)) == "up"
    assert len(sweep(now=later)) == 1  # nothing in hand any more: silent for real
