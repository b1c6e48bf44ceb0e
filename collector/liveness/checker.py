"""The checker's sweep: a silent host goes ``late``, is probed, and its incident opens.

Timing rule (with a checker that keeps ``PreProbes``, as the scheduler's does): after
``grace - lead`` of silence (``FREEZEWATCH_PROBE_LEAD_S``, default 1 s, at most half the grace;
with the defaults 2 s, two missed 1 s heartbeats) the host is *suspect* and its probes start in
the background, under their usual deadline. At ``grace`` the host goes ``late`` (CAS, as
always) and its incident opens at once from those probes, waiting only for probes still inside
their deadline: an incident opens at most ``max(grace, grace - lead + probe_deadline)`` after
the last heartbeat (4 s with the defaults) instead of ``grace + probe_deadline`` (5 s). A host
heard from before grace drops its pre-probes (counted in ``PreProbes.cleared``): no incident,
no alert. Suspect is not a host status; it lives only in the checker's memory, and a checker
without pre-probes for a silence (just started, or none kept) probes at grace as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from collector.db import changed_rows, read_scope, session_scope
from collector.incidents import lifecycle
from collector.liveness.arrivals import Arrivals
from collector.liveness.collector_runs import watch_started_at
from collector.liveness.planned import reboot_expected
from collector.liveness.preprobes import PreProbes
from collector.liveness.status import WATCHED, transition
from collector.liveness.suspects import (
    ProbeRunner,
    planned_silence,
    silent_for,
    stamped,
    start_pre_probes,
)
from collector.models import Host, HostSilence, HostStatus, Incident, IncidentKind
from collector.remote import probes
from collector.remote.ssh import SSHClient
from collector.settings import Settings

log = logging.getLogger(__name__)
# A lag below this leaves the probes their usual deadline: an SSH handshake takes a fraction of
# it, and a probe ending a few milliseconds later than the checker's tick costs a whole tick.
PROBE_LAG_MIN_S = 0.5


def prober(
    settings: Settings, ssh: SSHClient, lag_s: Callable[[], float] | None = None
) -> ProbeRunner:
    """Every configured probe under the settings' deadline, plus how far behind this collector
    runs (``lag_s``, ``liveness.backlog``) when they start: a starved collector's SSH handshake
    (paramiko's Python, on the same starved cores) is late as its ingest is, and a live host
    whose answer came late would read ``unreachable``, not ``agent_down``."""
    if lag_s is None:
        return partial(probes.run_probes, deadline_s=settings.probe_deadline_s, ssh=ssh)
    late = lag_s

    def run(target: probes.ProbeTarget) -> list[dict[str, Any]]:
        lag = late()
        extra = lag if lag >= PROBE_LAG_MIN_S else 0.0
        return probes.run_probes(target, deadline_s=settings.probe_deadline_s + extra, ssh=ssh)

    return run


def check_heartbeats(
    session_factory: sessionmaker[Session],
    *,
    now: datetime,
    settings: Settings,
    probe_runner: ProbeRunner | None = None,
    ssh: SSHClient | None = None,
    pre_probes: PreProbes | None = None,
    arrivals: Arrivals | None = None,
    orphans_before: datetime | None = None,
    start_suspects: bool = True,
    lag_s: float = 0.0,
) -> list[int]:
    """One sweep: suspect hosts start probing, every overdue host goes late and gets its incident.

    Returns the ids of the incidents opened by this call. Without ``pre_probes`` the probes of
    an overdue host run here, after grace. ``probe_runner`` defaults to the real probes over
    ``ssh`` (an ``SSHClient()`` unless given). A host with a batch in ``arrivals`` (arrived,
    not stored yet) is not silent and is skipped. A ``late`` claim made before
    ``orphans_before`` (when this process became the leader) is its dead predecessor's: it is
    taken over now rather than after ``late_reclaim_s``. ``start_suspects=False``: the caller
    starts the suspects' pre-probes itself (``start_pre_probes``). ``lag_s``: how far behind
    ingest is (``liveness.backlog``): overdue times are judged against ``now - lag_s``.
    """
    ssh = ssh or SSHClient()
    run = probe_runner or prober(settings, ssh)
    if pre_probes is not None and start_suspects:
        start_pre_probes(
            session_factory,
            now=now,
            settings=settings,
            pre_probes=pre_probes,
            run=run,
            arrivals=arrivals,
            lag_s=lag_s,
        )
    judged = now - timedelta(seconds=lag_s)
    reclaim = now - timedelta(seconds=settings.late_reclaim_s)
    if orphans_before is not None:
        reclaim = max(reclaim, min(orphans_before, now))
    with read_scope(session_factory) as session:  # no write lock (SQLite) until a host is due
        due = list(
            session.scalars(
                select(Host.id).where(
                    ((Host.overdue_at <= judged) & Host.status.in_(WATCHED))
                    | ((Host.status == HostStatus.LATE) & (Host.status_since <= reclaim))
                )
            )
        )
    opened = []
    # Pre-probes of all due hosts already run in parallel: waiting for them one by one costs
    # no more than the slowest.
    for host_id in due:
        if arrivals is not None and arrivals.pending(host_id):
            continue  # its batch is here, waiting to be stored
        incident_id = check_host(
            session_factory,
            host_id=host_id,
            now=now,
            settings=settings,
            run=run,
            ssh=ssh,
            pre_probes=pre_probes,
            reclaim=reclaim,
            judged=judged,
        )
        if incident_id is not None:
            opened.append(incident_id)
    return opened


def check_host(
    session_factory: sessionmaker[Session],
    *,
    host_id: int,
    now: datetime,
    settings: Settings,
    run: ProbeRunner,
    ssh: SSHClient,
    pre_probes: PreProbes | None = None,
    reclaim: datetime | None = None,
    judged: datetime | None = None,
) -> int | None:
    """Claim one overdue host (up/unknown → late), probe it, open its incident (late → lost).

    The probes are this silence's pre-probes when ``pre_probes`` holds them, else run here.
    A ``late`` claim from ``reclaim`` or before (default: ``late_reclaim_s`` ago) is re-taken.
    ``judged``: the instant overdue times are judged against (default ``now``).
    """
    if reclaim is None:
        reclaim = now - timedelta(seconds=settings.late_reclaim_s)
    judged = judged or now
    with session_scope(session_factory) as session:
        claimed = transition(
            session, host_id, WATCHED, HostStatus.LATE, now, Host.overdue_at <= judged
        )
        if not claimed:
            # A "late" claim whose checker died mid-probe is taken over.
            result = changed_rows(
                session,
                update(Host)
                .where(
                    Host.id == host_id,
                    Host.status == HostStatus.LATE,
                    Host.status_since <= reclaim,
                )
                .values(status_since=now)
                .execution_options(synchronize_session=False),
            )
            claimed = result == 1
        if not claimed:
            return None
        host = session.get(Host, host_id, populate_existing=True)
        assert host is not None
        silence = session.get(HostSilence, host_id)
        planned = planned_silence(host, silence) or reboot_expected(session, host=host, now=now)
        target = probes.ProbeTarget.of(host)
        silent_s = silent_for(host, now)
        ahead = (
            pre_probes.take(host_id, host.overdue_at)
            if pre_probes is not None and host.overdue_at is not None
            else None
        )
        started_at = watch_started_at(session)
        log.info("host %s: late (last heartbeat %s)", host.name, host.last_seen_at)

    probing_started = time.monotonic()
    ready = False
    found: list[dict[str, Any]] = []
    if host.paused:
        kind, status = IncidentKind.PAUSED, HostStatus.PAUSED
    elif planned:
        kind, status = IncidentKind.PLANNED, HostStatus.STOPPED
    else:
        if ahead is not None:
            ready = ahead.done()
            found = ahead.result()  # bounded: run_probes returns at its deadline
        else:
            found = stamped(run, target, silent_s)
        kind, status = probes.classify(found), HostStatus.LOST
    # Probes that finished before grace open the incident exactly at grace.
    waited = 0.0 if ready else time.monotonic() - probing_started
    opened_at = now + timedelta(seconds=waited)

    with session_scope(session_factory) as session:
        if not transition(
            session, host_id, (HostStatus.LATE,), status, now, Host.status_since == now
        ):
            return None  # the host came back while we probed, or another checker took over
        host = session.get(Host, host_id, populate_existing=True)
        assert host is not None
        incident = lifecycle.open_incident(
            session,
            host=host,
            kind=kind,
            probes=found,
            late_at=now,
            now=opened_at,
            settings=settings,
            shutdown=bool(planned and silence is not None and silence.shutdown),
            collector_started_at=started_at,
        )
        incident_id = incident.id

    if kind == IncidentKind.AGENT_DOWN and host.restart_agent and target.ssh is not None:
        outcome = probes.restart_agent(target.ssh, timeout=settings.probe_deadline_s * 5, ssh=ssh)
        log.warning("host %s: restarted agent over SSH: ok=%s", host.name, outcome["ok"])
        with session_scope(session_factory) as session:
            row = session.get(Incident, incident_id)
            if row is not None:
                row.agent_restart = outcome
    return incident_id
