"""Host liveness as seen from the collector's clock: heartbeats in, the checker's sweep out.

States: ``unknown`` → ``up`` → (overdue) ``late`` → probes → ``lost`` (an incident is open), or
``stopped``/``paused`` for planned silence. Every transition the checker makes is a
compare-and-set UPDATE, so several checker processes on one database never open (and alert)
the same incident twice.

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
import os
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from collector.db import session_scope
from collector.hosts import registry as hosts
from collector.incidents import lifecycle as incidents
from collector.liveness.preprobes import PreProbes, lead_s
from collector.models import Boot, CollectorRun, Host, HostSilence, Incident
from collector.remote import probes
from collector.settings import Settings

log = logging.getLogger(__name__)

SILENT = ("lost", "stopped", "paused")
ProbeRunner = Callable[[probes.ProbeTarget], list[dict[str, Any]]]


def record_heartbeat(
    session: Session,
    *,
    host: Host,
    boot_id: str,
    now: datetime,
    settings: Settings,
    stopping: dict[str, Any] | None = None,
) -> None:
    """Every accepted batch is a heartbeat: push the overdue time forward, close a silence.

    ``boot_id`` is the boot the sending agent runs in (``Batch.sender_boot_id``). The host's
    current boot only moves forward, to a boot first seen after it: a batch from an agent
    that does not name its boot may carry an older boot's records (catch-up, spool replay),
    which prove the agent alive but say nothing of the boot it runs in.
    ``stopping`` is the data of an ``agent_stopping`` event in this batch (planned silence).
    """
    # Lock the row so a checker's late → lost cannot slip between our read and write. SQLite
    # needs no row lock: its transactions here begin IMMEDIATE, holding the database's one.
    if session.get_bind().dialect.name != "sqlite":
        session.refresh(host, with_for_update=True)
    host.last_seen_at = now
    host.overdue_at = now + timedelta(seconds=host.grace_s or settings.grace_s)
    live = boot_id
    previous = host.current_boot_id
    forward = previous is None or live == previous or _first_seen_after(session, host, live)
    if host.status in SILENT:
        returned_boot = live if forward else previous
        assert returned_boot is not None
        incidents.mark_returned(
            session, host=host, boot_id=returned_boot, now=now, settings=settings
        )
    elif forward and previous is not None and live != previous:
        # Back first with the old boot (catch-up before the live stream): now the new boot.
        incidents.mark_rebooted(session, host=host, boot_id=live, now=now, settings=settings)
    if forward:
        host.current_boot_id = live
    if host.status != "up":
        host.status = "up"
        host.status_since = now
    silence = session.get(HostSilence, host.id)
    if stopping is not None:
        if silence is None:
            silence = HostSilence(host_id=host.id, announced_at=now)
            session.add(silence)
        silence.announced_at = now
        silence.shutdown = bool(stopping.get("shutdown"))
        silence.boot_id = boot_id
    elif silence is not None:
        session.delete(silence)
    session.flush()


def _first_seen_after(session: Session, host: Host, boot_id: str) -> bool:
    """Was ``boot_id`` first seen after the host's current boot? (boots rows are created on
    first sight, so their ids are in first-seen order.)"""
    candidate = hosts.boot_pk(session, host=host, boot_id=boot_id)
    current = session.scalar(
        select(Boot.id).where(Boot.host_id == host.id, Boot.boot_id == host.current_boot_id)
    )
    return current is None or candidate > current


def stopping_event(batch: Any) -> dict[str, Any] | None:
    """The ``agent_stopping`` data of this agent instance, if the batch carries it.

    A restarted agent replaying its predecessor's spool also replays that predecessor's
    ``agent_stopping``; events older than the sending agent's start are history, not intent.
    """
    started = batch.agent.started_at
    for event in reversed(batch.events):
        if event.kind == "agent_stopping" and (started is None or event.ts >= started - 1):
            return dict(event.data)
    return None


def _cas(
    session: Session, host_id: int, old: tuple[str, ...], new: str, now: datetime, *where: Any
) -> bool:
    """``UPDATE hosts SET status=new WHERE id=? AND status IN old AND ...``: True if we won."""
    stmt = update(Host).where(Host.id == host_id, Host.status.in_(old), *where)
    result = session.execute(
        stmt.values(status=new, status_since=now).execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def check_heartbeats(
    session_factory: sessionmaker[Session],
    *,
    now: datetime,
    settings: Settings,
    probe_runner: ProbeRunner | None = None,
    ssh_runner: probes.SSHRunner | None = None,
    pre_probes: PreProbes | None = None,
) -> list[int]:
    """One sweep: suspect hosts start probing, every overdue host goes late and gets its incident.

    Returns the ids of the incidents opened by this call. Without ``pre_probes`` the probes of
    an overdue host run here, after grace.
    """
    if pre_probes is not None:
        start_pre_probes(
            session_factory,
            now=now,
            settings=settings,
            pre_probes=pre_probes,
            run=prober(settings, probe_runner, ssh_runner),
        )
    reclaim = now - timedelta(seconds=settings.late_reclaim_s)
    with session_scope(session_factory) as session:
        due = list(
            session.scalars(
                select(Host.id).where(
                    ((Host.overdue_at <= now) & Host.status.in_(("up", "unknown")))
                    | ((Host.status == "late") & (Host.status_since <= reclaim))
                )
            )
        )
    opened = []
    # Pre-probes of all due hosts already run in parallel: waiting for them one by one costs
    # no more than the slowest.
    for host_id in due:
        incident_id = check_host(
            session_factory,
            host_id=host_id,
            now=now,
            settings=settings,
            probe_runner=probe_runner,
            ssh_runner=ssh_runner,
            pre_probes=pre_probes,
        )
        if incident_id is not None:
            opened.append(incident_id)
    return opened


def prober(
    settings: Settings,
    probe_runner: ProbeRunner | None = None,
    ssh_runner: probes.SSHRunner | None = None,
) -> ProbeRunner:
    """The injected probe runner, else every configured probe under the settings' deadline."""
    if probe_runner is not None:
        return probe_runner
    return partial(_run_probes, deadline_s=settings.probe_deadline_s, ssh_runner=ssh_runner)


def _run_probes(
    target: probes.ProbeTarget, *, deadline_s: float, ssh_runner: probes.SSHRunner | None
) -> list[dict[str, Any]]:
    return probes.run_probes(target, deadline_s=deadline_s, ssh_runner=ssh_runner)


def _stamped(run: ProbeRunner, target: probes.ProbeTarget, silent_s: float | None) -> Any:
    """Each result says how long the host had been silent when probing began."""
    found = run(target)
    if silent_s is not None:
        for result in found:
            result.setdefault("silent_s", round(silent_s, 3))
    return found


def _silent_s(host: Host, now: datetime) -> float | None:
    return None if host.last_seen_at is None else (now - host.last_seen_at).total_seconds()


def _planned(host: Host, silence: HostSilence | None) -> bool:
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
) -> list[int]:
    """Drop the pre-probes of silences that ended; start them for hosts now suspect.

    Never blocks on probes, so the scheduler runs it as its own job: a sweep waiting for one
    host's probes never delays another host's start. Returns the ids of the hosts started now.
    """
    pending = pre_probes.pending()
    started = []
    with session_scope(session_factory) as session:
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
                if row is not None and row.status in ("up", "unknown"):
                    if row.overdue_at == overdue_at:
                        continue  # still the same silence
                    # A heartbeat moved the overdue time on: the host was only slow.
                    log.info("host %s: heard from again before grace, pre-probes dropped", row.name)
                    pre_probes.discard(host_id, overdue_at, cleared=True)
                else:
                    pre_probes.discard(
                        host_id, overdue_at, cleared=False
                    )  # gone, or late elsewhere
        horizon = now + timedelta(seconds=settings.probe_lead_s)
        suspects = session.scalars(
            select(Host).where(Host.status.in_(("up", "unknown")), Host.overdue_at <= horizon)
        )
        for host in suspects:
            assert host.overdue_at is not None
            grace = host.grace_s or settings.grace_s
            if host.overdue_at - timedelta(seconds=lead_s(grace, settings.probe_lead_s)) > now:
                continue
            if host.paused or _planned(host, session.get(HostSilence, host.id)):
                continue  # planned silence is not probed
            silent_s = _silent_s(host, now)
            target = probes.ProbeTarget.of(host)
            if pre_probes.start(host.id, host.overdue_at, partial(_stamped, run, target, silent_s)):
                started.append(host.id)
                log.info(
                    "host %s: suspect (%s s silent), probing ahead of grace",
                    host.name,
                    None if silent_s is None else round(silent_s, 2),
                )
    return started


def check_host(
    session_factory: sessionmaker[Session],
    *,
    host_id: int,
    now: datetime,
    settings: Settings,
    probe_runner: ProbeRunner | None = None,
    ssh_runner: probes.SSHRunner | None = None,
    pre_probes: PreProbes | None = None,
) -> int | None:
    """Claim one overdue host (up/unknown → late), probe it, open its incident (late → lost).

    The probes are this silence's pre-probes when ``pre_probes`` holds them, else run here.
    """
    reclaim = now - timedelta(seconds=settings.late_reclaim_s)
    with session_scope(session_factory) as session:
        claimed = _cas(session, host_id, ("up", "unknown"), "late", now, Host.overdue_at <= now)
        if not claimed:
            result = session.execute(
                update(Host)
                .where(Host.id == host_id, Host.status == "late", Host.status_since <= reclaim)
                .values(status_since=now)
                .execution_options(synchronize_session=False)
            )
            claimed = result.rowcount == 1
        if not claimed:
            return None
        host = session.get(Host, host_id, populate_existing=True)
        assert host is not None
        silence = session.get(HostSilence, host_id)
        planned = _planned(host, silence)
        target = probes.ProbeTarget.of(host)
        silent_s = _silent_s(host, now)
        ahead = (
            pre_probes.take(host_id, host.overdue_at)
            if pre_probes is not None and host.overdue_at is not None
            else None
        )
        run = current_run(session)
        started_at = run.started_at if run else None
        log.info("host %s: late (last heartbeat %s)", host.name, host.last_seen_at)

    probing_started = time.monotonic()
    ready = False
    if planned or host.paused:
        kind, status, found = (
            ("paused", "paused", []) if host.paused else ("planned", "stopped", [])
        )
    else:
        if ahead is not None:
            ready = ahead.done()
            found = ahead.result()  # bounded: run_probes returns at its deadline
        else:
            found = _stamped(prober(settings, probe_runner, ssh_runner), target, silent_s)
        kind, status = probes.classify(found), "lost"
    # Probes that finished before grace open the incident exactly at grace.
    waited = 0.0 if ready else time.monotonic() - probing_started
    opened_at = now + timedelta(seconds=waited)

    with session_scope(session_factory) as session:
        if not _cas(session, host_id, ("late",), status, now, Host.status_since == now):
            return None  # the host came back while we probed, or another checker took over
        host = session.get(Host, host_id, populate_existing=True)
        assert host is not None
        incident = incidents.open_incident(
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

    if kind == "agent_down" and host.restart_agent and target.can_ssh:
        outcome = probes.restart_agent(
            target, timeout=settings.probe_deadline_s * 5, ssh_runner=ssh_runner
        )
        log.warning("host %s: restarted agent over SSH: ok=%s", host.name, outcome["ok"])
        with session_scope(session_factory) as session:
            row = session.get(Incident, incident_id)
            if row is not None:
                row.agent_restart = outcome
    return incident_id


def current_run(session: Session) -> CollectorRun | None:
    return session.scalar(select(CollectorRun).order_by(CollectorRun.id.desc()).limit(1))


def start_collector_run(
    session_factory: sessionmaker[Session], *, now: datetime, settings: Settings
) -> int:
    """Record this process's start and the collector downtime before it; reset host clocks.

    Hosts that were up get ``unknown`` and one fresh grace period from now: they were not
    watched while the collector was down, so their silence so far proves nothing. A host
    still silent after that grace is reported (its last heartbeat is kept on the incident).
    """
    with session_scope(session_factory) as session:
        previous = current_run(session)
        down_since = None
        if previous is not None:
            down_since = previous.stopped_at or previous.last_alive_at
        run = CollectorRun(
            started_at=now, last_alive_at=now, down_since=down_since, pid=os.getpid()
        )
        session.add(run)
        for host in session.scalars(select(Host).where(Host.status.in_(("up", "late")))):
            host.status = "unknown"
            host.status_since = now
            host.overdue_at = now + timedelta(seconds=host.grace_s or settings.grace_s)
        session.flush()
        if down_since is not None:
            log.warning(
                "collector was down from %s to %s (%.1f s)",
                down_since.isoformat(),
                now.isoformat(),
                (now - down_since).total_seconds(),
            )
        return run.id


def tick_collector_alive(
    session_factory: sessionmaker[Session], *, run_id: int, now: datetime
) -> None:
    with session_scope(session_factory) as session:
        session.execute(
            update(CollectorRun).where(CollectorRun.id == run_id).values(last_alive_at=now)
        )


def stop_collector_run(
    session_factory: sessionmaker[Session], *, run_id: int, now: datetime
) -> None:
    with session_scope(session_factory) as session:
        session.execute(
            update(CollectorRun)
            .where(CollectorRun.id == run_id)
            .values(last_alive_at=now, stopped_at=now)
        )


def collector_downtimes(session: Session, *, limit: int = 100) -> list[dict[str, Any]]:
    runs = session.scalars(
        select(CollectorRun)
        .where(CollectorRun.down_since.is_not(None))
        .order_by(CollectorRun.id.desc())
        .limit(limit)
    )
    return [
        {
            "down_since": r.down_since.timestamp() if r.down_since else None,
            "up_at": r.started_at.timestamp(),
            "duration_s": (r.started_at - r.down_since).total_seconds() if r.down_since else None,
        }
        for r in runs
    ]
