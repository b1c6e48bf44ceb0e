"""Reboots the collector asked for: the silence that follows is planned, never an alert.

A matrix cold boot writes a ``PlannedReboot`` before it sends the reboot command. While the host
still runs the boot it had then (and the marker has not expired), the checker opens a silence
as ``planned`` (status ``stopped``, no probes, no alert) instead of ``unreachable``; the
agent's first batch from the new boot resolves it as ``planned_reboot``. A host that comes
back on the same boot, or stays away past ``expires_at``, is watched as always.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from collector.models import Host, PlannedReboot


def expect_reboot(
    session: Session, *, host: Host, now: datetime, until: datetime, reason: str
) -> PlannedReboot:
    """Mark the host's next silence as a planned reboot of its current boot, until ``until``."""
    marker = session.get(PlannedReboot, host.id)
    if marker is None:
        marker = PlannedReboot(host_id=host.id, requested_at=now, expires_at=until)
        session.add(marker)
    marker.requested_at, marker.expires_at = now, until
    marker.boot_id = host.current_boot_id
    marker.reason = reason
    session.flush()
    return marker


def clear_reboot(session: Session, *, host_id: int) -> None:
    """The reboot happened (or was given up): the host's silences count again."""
    session.execute(delete(PlannedReboot).where(PlannedReboot.host_id == host_id))


def reboot_expected(session: Session, *, host: Host, now: datetime) -> bool:
    """Is a silence of this host, now, the reboot the collector asked for?"""
    return host.id in reboots_expected(session, hosts=[host], now=now)


def reboots_expected(session: Session, *, hosts: Sequence[Host], now: datetime) -> set[int]:
    """The ids of ``hosts`` whose silence, now, is the reboot the collector asked for."""
    boots = {host.id: host.current_boot_id for host in hosts}
    if not boots:
        return set()
    markers = session.scalars(select(PlannedReboot).where(PlannedReboot.host_id.in_(boots)))
    return {m.host_id for m in markers if m.expires_at > now and m.boot_id == boots[m.host_id]}
