"""A reboot the collector asked for is a planned silence (no alert); any other silence alerts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from collector import db
from collector.liveness import checker
from collector.liveness.planned import clear_reboot, expect_reboot, reboot_expected
from collector.models import Delivery, Host, Incident
from collector.timeutil import utcnow
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import BOOT_A, BOOT_B, factory, post


def no_probes(_target: Any) -> list[dict[str, Any]]:
    return []


@pytest.fixture
def alerting(db_url: str) -> Iterator[Collector]:
    """A collector with one webhook target, so every alert leaves an outbox row."""
    yield from make_collector(db_url, webhook_urls="http://127.0.0.1:9/hook|json")


def silence(c: Collector, *, planned_for: str | None, expires_in_s: float = 600) -> Incident:
    """Host up on BOOT_A, optionally a planned reboot of ``planned_for``, then grace passes."""
    token = c.add_host("spark-01")
    post(c, token, "spark-01", boot=BOOT_A)
    sf = factory(c)
    now = utcnow()
    if planned_for is not None:
        with db.session_scope(sf) as s:
            host = s.scalars(select(Host)).one()
            host.current_boot_id = planned_for
            expect_reboot(
                s, host=host, now=now, until=now + timedelta(seconds=expires_in_s), reason="test"
            )
            host.current_boot_id = BOOT_A
    later = now + timedelta(seconds=c.settings.grace_s + 0.5)
    (incident_id,) = checker.check_heartbeats(
        sf, now=later, settings=c.settings, probe_runner=no_probes
    )
    with db.session_scope(sf) as s:
        incident = s.get(Incident, incident_id)
        assert incident is not None
        s.expunge(incident)
    return incident


def alerts(c: Collector) -> list[str]:
    with db.session_scope(factory(c)) as s:
        return list(s.scalars(select(Delivery.event).order_by(Delivery.id)))


def test_requested_reboot_is_planned_not_probed_not_alerted(alerting: Collector) -> None:
    incident = silence(alerting, planned_for=BOOT_A)
    assert incident.kind == "planned" and incident.probes == []
    with db.session_scope(factory(alerting)) as s:
        assert s.scalars(select(Host.status)).one() == "stopped"
    assert alerts(alerting) == []


def test_requested_reboot_returns_as_planned_reboot(alerting: Collector) -> None:
    token = alerting.add_host("spark-02")
    post(alerting, token, "spark-02", boot=BOOT_A)
    sf = factory(alerting)
    now = utcnow()
    with db.session_scope(sf) as s:
        host = s.scalars(select(Host).where(Host.name == "spark-02")).one()
        expect_reboot(s, host=host, now=now, until=now + timedelta(minutes=10), reason="test")
        assert reboot_expected(s, host=host, now=now)
    later = now + timedelta(seconds=alerting.settings.grace_s + 0.5)
    (incident_id,) = checker.check_heartbeats(
        sf, now=later, settings=alerting.settings, probe_runner=no_probes
    )
    post(alerting, token, "spark-02", boot=BOOT_B)
    with db.session_scope(sf) as s:
        incident = s.get(Incident, incident_id)
        assert incident is not None
        assert (incident.kind, incident.resolution) == ("planned", "planned_reboot")
        host = s.scalars(select(Host).where(Host.name == "spark-02")).one()
        # The marker belongs to the boot it was written for: the new boot is watched again.
        assert not reboot_expected(s, host=host, now=later)
        clear_reboot(s, host_id=host.id)
    assert alerts(alerting) == []


def test_a_freeze_without_a_requested_reboot_still_alerts(alerting: Collector) -> None:
    incident = silence(alerting, planned_for=None)
    assert incident.kind == "unreachable"
    assert alerts(alerting) == ["incident.opened"]


def test_a_marker_for_an_older_boot_does_not_hide_a_freeze(alerting: Collector) -> None:
    incident = silence(alerting, planned_for=BOOT_B)
    assert incident.kind == "unreachable"
    assert alerts(alerting) == ["incident.opened"]


def test_an_expired_marker_does_not_hide_a_freeze(alerting: Collector) -> None:
    incident = silence(alerting, planned_for=BOOT_A, expires_in_s=1)
    assert incident.kind == "unreachable"
    assert alerts(alerting) == ["incident.opened"]
