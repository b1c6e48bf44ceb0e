"""Suspect hosts: silent for ``grace - lead``, their probes start ahead of grace.

The checker's timing rule is in ``checker``; this is its first half, run by the scheduler as a
job of its own so that no sweep waiting on a late host's probes delays another host's start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from collector.db import read_scope
from collector.liveness.arrivals import Arrivals
from collector.liveness.planned import reboots_expected
from collector.liveness.preprobes import PreProbes, lead_s
from collector.liveness.status import WATCHED, grace_s
from collector.models import Host, HostSilence
from collector.remote import probes
from collector.settings import Settings

log = logging.getLogger(__name__)

ProbeRunner = Callable[[probes.ProbeTarget], list[dict[str, Any]]]


def stamped(run: ProbeRunner, target: probes.ProbeTarget, silent_s: float | None) -> Any:
    """Each result says how long the host had been silent when probing began."""
    found = run(target)
    if silent_s is not None:
        for result in found:
            result.setdefault("silent_s", round(silent_s, 3))
    return found


def silent_for(host: Host, now: datetime) -> float | None:
    return None if host.last_seen_at is None else (now - host.last_seen_at).total_seconds()


def planned_silence(host: Host, silence: HostSilence | None) -> bool:
    """The agent announced this silence (its last batch said it was stopping)."""
    return silence is not None and (
        host.last_seen_at is None or silence.announced_at >= host.last_seen_at
    )


def start_pre_probes(
    session_factory: sessionmaker[Session],
    *,
    now: datetime,
    settings: Settings,
    pre_probes: PreProbes,
    run: ProbeRunner,
    arrivals: Arrivals | None = None,
    lag_s: float = 0.0,
) -> list[int]:
    """Drop the pre-probes of silences that ended; start them for hosts now suspect (not those
    with a batch in ``arrivals``), judged against ``now - lag_s``.

    Never blocks on probes, so the scheduler runs it as its own job: a sweep waiting for one
    host's probes never delays another host's start. Returns the ids of the hosts started now.
    """
    pending = pre_probes.pending()
    started: list[int] = []
    with read_scope(session_factory) as session:
        if pending:
            rows = {
                row.id: row
                for row in session.execute(
                    select(Host.id, Host.name, Host.status, Host.overdue_at).where(
                        Host.id.in_(pending)
                    )
                )
            }
            for host_id, overdue_at in pending.items():
                row = rows.get(host_id)
                if row is not None and row.status in WATCHED:
                    if row.overdue_at == overdue_at:
                        continue  # still the same silence
                    # A heartbeat moved the overdue time on: the host was only slow.
                    log.info("host %s: heard from again before grace, pre-probes dropped", row.name)
                    pre_probes.discard(host_id, overdue_at, cleared=True)
                else:
                    # gone, or late elsewhere
                    pre_probes.discard(host_id, overdue_at, cleared=False)
        # A few queries a tick however many hosts are suspect: hosts whose probes for this
        # silence already run are left out before anything else is looked up.
        judged = now - timedelta(seconds=lag_s)
        horizon = judged + timedelta(seconds=settings.probe_lead_s)
        running = pre_probes.pending()
        fresh = [
            host_id
            for host_id, overdue_at in session.execute(
                select(Host.id, Host.overdue_at).where(
                    Host.status.in_(WATCHED), Host.overdue_at <= horizon
                )
            )
            if running.get(host_id) != overdue_at
            and not (arrivals is not None and arrivals.pending(host_id))
        ]
        if not fresh:
            return started
        suspects = list(session.scalars(select(Host).where(Host.id.in_(fresh))))
        silences = {
            s.host_id: s
            for s in session.scalars(select(HostSilence).where(HostSilence.host_id.in_(fresh)))
        }
        rebooting = reboots_expected(session, hosts=suspects, now=now)
        for host in suspects:
            assert host.overdue_at is not None
            lead = lead_s(grace_s(host, settings), settings.probe_lead_s)
            if host.overdue_at - timedelta(seconds=lead) > judged:
                continue
            if host.paused or planned_silence(host, silences.get(host.id)) or host.id in rebooting:
                continue  # planned silence is not probed
            silent_s = silent_for(host, now)
            target = probes.ProbeTarget.of(host)
            if pre_probes.start(host.id, host.overdue_at, partial(stamped, run, target, silent_s)):
                started.append(host.id)
                log.info(
                    "host %s: suspect (%s s silent), probing ahead of grace",
                    host.name,
                    None if silent_s is None else round(silent_s, 2),
                )
    return started
