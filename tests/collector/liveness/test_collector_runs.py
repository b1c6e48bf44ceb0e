"""Replicas on one real PostgreSQL: a collector started next to a leading one was preceded by no
downtime, so it resets no host and holds no alert; one started with no leader is a restart after
downtime as before; a new leader takes over the late claims its dead predecessor left."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from typing import Any

import httpx
import time_machine
from sqlalchemy import select

from collector import db
from collector.alerts import delivery as webhooks
from collector.leader import Leadership
from collector.liveness import checker
from collector.liveness.collector_runs import watch_started_at
from collector.liveness.status import WATCHED, transition
from collector.models import CollectorRun, Host, HostStatus, Incident
from collector.timeutil import utcnow
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import factory, post, receiver
from tests.collector.liveness.test_checker import no_probes, subscribe
from tests.support.postgres import drop_database, fresh_database

collector_on = contextmanager(make_collector)


@contextmanager
def database(postgres_url: str) -> Iterator[str]:
    url = fresh_database(postgres_url)
    try:
        yield url
    finally:
        drop_database(url)


def runs(c: Collector) -> list[CollectorRun]:
    with db.session_scope(factory(c)) as s:
        found = list(s.scalars(select(CollectorRun).order_by(CollectorRun.id)))
        s.expunge_all()
        return found


def host_row(c: Collector, name: str) -> Host:
    with db.session_scope(factory(c)) as s:
        host = s.scalar(select(Host).where(Host.name == name))
        assert host is not None
        s.expunge(host)
        return host


def test_a_replica_started_next_to_a_leader_leaves_hosts_and_alerts_alone(
    postgres_url: str,
) -> None:
    with (
        database(postgres_url) as url,
        receiver() as rec,
        time_machine.travel(utcnow(), tick=False) as clock,
        collector_on(url) as first,
    ):
        leader = Leadership(url)  # the first collector's scheduler, leading
        assert leader.refresh()
        subscribe(first, rec)
        token = first.add_host("spark-01")
        post(first, token, "spark-01")
        before = host_row(first, "spark-01")
        clock.shift(1)
        with collector_on(url) as second:
            started, joined = runs(second)
            assert (joined.joined, joined.down_since) == (True, None)
            after = host_row(second, "spark-01")
            assert (after.status, after.overdue_at) == ("up", before.overdue_at)
            with db.session_scope(factory(second)) as s:
                assert watch_started_at(s) == started.started_at

            # The first one dies; the second takes over and the host is silent past grace.
            leader.close()
            takeover = Leadership(url)
            assert takeover.refresh()
            clock.shift(second.settings.grace_s + 0.1)
            sweep = partial(
                checker.check_heartbeats,
                factory(second),
                settings=second.settings,
                probe_runner=no_probes,
                orphans_before=takeover.since,
            )
            (opened,) = sweep(now=utcnow())
            with db.session_scope(factory(second)) as s:
                incident = s.get(Incident, opened)
                assert incident is not None
                assert (incident.collector_down, incident.alert_held_until) == (False, None)
            clock.shift(0.5)  # the incident opened once its probes ended
            with httpx.Client() as http:
                webhooks.deliver_due_alerts(
                    factory(second), now=utcnow(), http_client=http, settings=second.settings
                )
            assert rec.events() == ["incident.opened"]  # at once: no downtime to wait out
            takeover.close()


def test_a_start_with_no_leader_is_a_restart_after_downtime(postgres_url: str) -> None:
    with (
        database(postgres_url) as url,
        time_machine.travel(utcnow(), tick=False) as clock,
    ):
        with collector_on(url) as first:
            token = first.add_host("spark-01")
            post(first, token, "spark-01")
        clock.shift(60)
        with collector_on(url) as second:
            stopped, restarted = runs(second)
            assert restarted.joined is False and restarted.down_since == stopped.stopped_at
            assert host_row(second, "spark-01").status == "unknown"  # one startup grace
            with db.session_scope(factory(second)) as s:
                assert watch_started_at(s) == restarted.started_at


def test_a_new_leader_takes_over_a_late_claim_of_its_dead_predecessor_at_once(
    collector: Collector,
) -> None:
    token = collector.add_host("spark-01")
    post(collector, token, "spark-01")
    sf, settings = factory(collector), collector.settings
    claimed_at = utcnow() + timedelta(seconds=settings.grace_s + 0.1)
    with db.session_scope(sf) as s:
        host = s.scalar(select(Host).where(Host.name == "spark-01"))
        assert host is not None
        # The dead leader claimed it (late) and died before its probes ended.
        assert transition(s, host.id, WATCHED, HostStatus.LATE, claimed_at)
    now = claimed_at + timedelta(seconds=1)
    sweep: Any = partial(checker.check_heartbeats, sf, settings=settings, probe_runner=no_probes)
    assert sweep(now=now) == []  # an ordinary sweep waits late_reclaim_s for the claim
    (opened,) = sweep(now=now, orphans_before=claimed_at + timedelta(seconds=0.5))
    assert host_row(collector, "spark-01").status == "lost"
    with db.session_scope(sf) as s:
        incident = s.get(Incident, opened)
        assert incident is not None and incident.late_at == now
