"""Every accepted batch is a heartbeat: it pushes the host's overdue time on and ends a silence.

Liveness is always judged on the collector's clock. A batch also tells whether the silence
that follows is planned (``agent_stopping``), which boot the agent runs in, how much spool it
still has to replay (``backlog``), and when the agent sent it: the agent's clock offset.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from collector import db
from collector.hosts.registry import boot_pk, find_boot_pk
from collector.incidents import lifecycle
from collector.liveness.status import SILENT, grace_s, mark_up
from collector.models import Host, HostSilence
from collector.schemas import Batch
from collector.settings import Settings

# A clock offset moving more than this between two batches is a step (NTP, a skewed boot):
# taken at once. Smaller moves are network jitter and queueing: smoothed.
OFFSET_STEP_S = 5.0
OFFSET_SMOOTHING = 0.1


def measured_offset(previous: float | None, *, received_at: float, sent_at: float) -> float:
    """The agent's clock offset (our clock minus its), smoothed over the batches."""
    sample = received_at - sent_at
    if previous is None or abs(sample - previous) > OFFSET_STEP_S:
        return round(sample, 3)
    return round(previous + (sample - previous) * OFFSET_SMOOTHING, 3)


def record_heartbeat(
    session: Session,
    *,
    host: Host,
    boot_id: str,
    now: datetime,
    settings: Settings,
    stopping: dict[str, Any] | None = None,
    sent_at: float | None = None,
    backlog_bytes: int | None = None,
) -> None:
    """Push the overdue time forward, resolve a silence, note a planned one, keep the agent's
    backlog and clock offset (``sent_at``: its clock at sending; both None from older agents).

    ``boot_id`` is the boot the sending agent runs in (``Batch.sender_boot_id``). The host's
    current boot only moves forward, to a boot first seen after it: a batch from an agent
    that does not name its boot may carry an older boot's records (catch-up, spool replay),
    which prove the agent alive but say nothing of the boot it runs in.
    ``stopping`` is the data of an ``agent_stopping`` event in this batch (planned silence).
    """
    # Lock the row so a checker's late → lost cannot slip between our read and write.
    db.lock_for_update(session, host)
    host.last_seen_at = now
    host.overdue_at = now + timedelta(seconds=grace_s(host, settings))
    host.backlog_bytes = backlog_bytes
    if sent_at is not None:
        host.clock_offset_s = measured_offset(
            host.clock_offset_s, received_at=now.timestamp(), sent_at=sent_at
        )
    previous = host.current_boot_id
    forward = previous is None or boot_id == previous or _first_seen_after(session, host, boot_id)
    if host.status in SILENT:
        returned_boot = boot_id if forward else previous
        assert returned_boot is not None
        lifecycle.mark_returned(
            session, host=host, boot_id=returned_boot, now=now, settings=settings
        )
    elif forward and previous is not None and boot_id != previous:
        # Back first with the old boot (catch-up before the live stream): now the new boot.
        lifecycle.mark_rebooted(session, host=host, boot_id=boot_id, now=now, settings=settings)
    if forward:
        host.current_boot_id = boot_id
    mark_up(host, now)
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
    """Was ``boot_id`` first seen after the host's current boot? (boot rows are created on
    first sight, so their ids are in first-seen order.)"""
    candidate = boot_pk(session, host=host, boot_id=boot_id)
    current = find_boot_pk(session, host_id=host.id, boot_id=host.current_boot_id)
    return current is None or candidate > current


def stopping_event(batch: Batch) -> dict[str, Any] | None:
    """The ``agent_stopping`` data of this agent instance, if the batch carries it.

    A restarted agent replaying its predecessor's spool also replays that predecessor's
    ``agent_stopping``; events older than the sending agent's start are history, not intent.
    """
    started = batch.agent.started_at
    for event in reversed(batch.events):
        if event.kind == "agent_stopping" and (started is None or event.ts >= started - 1):
            return dict(event.data)
    return None
