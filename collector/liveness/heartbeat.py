"""Every accepted batch is a heartbeat: it pushes the host's overdue time on and ends a silence.

Liveness is always judged on the collector's clock. A batch also tells whether the silence
that follows is planned (``agent_stopping``), which boot the agent runs in, how much spool it
still has to replay (``backlog``), and when the agent sent it: the agent's clock offset.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from collector import db
from collector.hosts.registry import boot_pk, find_boot_pk
from collector.incidents import lifecycle
from collector.liveness.status import SILENT, grace_s, mark_up
from collector.models import Boot, Host, HostSilence, HostStatus, table_of
from collector.prepared import Prepared
from collector.schemas import AgentInfo, Batch
from collector.settings import Settings

# Each batch's reading is the offset plus the time the batch took to arrive, never less: a
# lower reading is taken at once (less delay, or the agent's clock stepped forward), a higher
# one moves the offset by this share of the difference. A POST held up in a network cut reads
# its whole delay (seconds) and must not move the host's time base by that much: taken at once,
# it shifted the charts and made a replay that stopped where the host froze look like it
# reached the return. An agent clock stepped back is followed within about 30 batches.
OFFSET_SMOOTHING = 0.1


def measured_offset(previous: float | None, *, received_at: float, sent_at: float) -> float:
    """The agent's clock offset (our clock minus its): the lowest reading, raised slowly
    (``OFFSET_SMOOTHING``)."""
    sample = received_at - sent_at
    if previous is None or sample <= previous:
        return round(sample, 3)
    return round(previous + (sample - previous) * OFFSET_SMOOTHING, 3)


BEAT_COLUMNS = ("last_seen_at", "overdue_at", "backlog_bytes", "clock_offset_s")
AGENT_COLUMNS = ("agent_version", "agent_pid", "agent_started_at")


class Sender(NamedTuple):
    """What a batch's heartbeat needs of its host, read in one statement (``read_sender``)."""

    id: int
    token_hash: str
    status: str
    current_boot_id: str | None
    grace_s: float | None
    clock_offset_s: float | None
    silenced: bool  # a host_silences row: the agent announced a stop
    boot_pk: int | None  # the row of the batch's boot, None before its first sight


_hosts, _boots, _silences = table_of(Host), table_of(Boot), table_of(HostSilence)
_SENDER = Prepared(
    select(
        _hosts.c.id,
        _hosts.c.token_hash,
        _hosts.c.status,
        _hosts.c.current_boot_id,
        _hosts.c.grace_s,
        _hosts.c.clock_offset_s,
        _silences.c.host_id.is_not(None),
        _boots.c.id,
    )
    .select_from(
        _hosts.outerjoin(
            _boots, (_boots.c.host_id == _hosts.c.id) & (_boots.c.boot_id == bindparam("boot_id"))
        ).outerjoin(_silences, _silences.c.host_id == _hosts.c.id)
    )
    .where(_hosts.c.id == bindparam("host_id"))
)
# The common heartbeat: a compare-and-set on "up, in this boot".
_BEAT = Prepared(
    update(_hosts)
    .where(
        _hosts.c.id == bindparam("host_id"),
        _hosts.c.status == HostStatus.UP,
        _hosts.c.current_boot_id == bindparam("boot_id"),
    )
    .values({name: bindparam(name) for name in (*BEAT_COLUMNS, *AGENT_COLUMNS)})
)


def read_sender(session: Session, *, host_id: int, boot_id: str) -> Sender | None:
    """The host's heartbeat state and the row of ``boot_id`` (the batch's records' boot): one
    indexed statement, no ORM object."""
    row = _SENDER.first(session, host_id=host_id, boot_id=boot_id)
    if row is None:
        return None
    return Sender(*row)


def _beat_values(
    *,
    grace: float,
    offset: float | None,
    now: datetime,
    sent_at: float | None,
    backlog_bytes: int | None,
    agent: AgentInfo | None,
) -> dict[str, Any]:
    """The host columns a heartbeat sets (BEAT_COLUMNS, and AGENT_COLUMNS with ``agent``)."""
    if sent_at is not None:
        offset = measured_offset(offset, received_at=now.timestamp(), sent_at=sent_at)
    values: dict[str, Any] = {
        "last_seen_at": now,
        "overdue_at": now + timedelta(seconds=grace),
        "backlog_bytes": backlog_bytes,
        "clock_offset_s": offset,
    }
    if agent is not None:
        values |= {
            "agent_version": agent.version,
            "agent_pid": agent.pid,
            "agent_started_at": agent.started_at,
        }
    return values


def beat(
    session: Session,
    *,
    sender: Sender,
    boot_id: str,
    now: datetime,
    settings: Settings,
    stopping: dict[str, Any] | None = None,
    sent_at: float | None = None,
    backlog_bytes: int | None = None,
    agent: AgentInfo,
) -> bool:
    """The common heartbeat, one UPDATE: the host up in the same boot, no stop announced now or
    before. False, with nothing written, when the host is not in that state (or left it since
    ``sender`` was read: the UPDATE is a compare-and-set); ``record_heartbeat`` then does the
    whole job. Arguments as ``record_heartbeat``'s."""
    if sender.status != HostStatus.UP or sender.silenced or stopping is not None:
        return False
    if boot_id != sender.current_boot_id:
        return False
    values = _beat_values(
        grace=sender.grace_s or settings.grace_s,
        offset=sender.clock_offset_s,
        now=now,
        sent_at=sent_at,
        backlog_bytes=backlog_bytes,
        agent=agent,
    )
    return _BEAT.rowcount(session, host_id=sender.id, boot_id=boot_id, **values) == 1


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
    agent: AgentInfo | None = None,
) -> None:
    """Push the overdue time forward, resolve a silence, note a planned one, keep the agent's
    backlog and clock offset (``sent_at``: its clock at sending; both None from older agents)
    and what it is (``agent``: version, pid, start).

    ``boot_id`` is the boot the sending agent runs in (``Batch.sender_boot_id``). The host's
    current boot only moves forward, to a boot first seen after it: a batch from an agent
    that does not name its boot may carry an older boot's records (catch-up, spool replay),
    which prove the agent alive but say nothing of the boot it runs in.
    ``stopping`` is the data of an ``agent_stopping`` event in this batch (planned silence).
    """
    # Lock the row so a checker's late → lost cannot slip between our read and write.
    db.lock_for_update(session, host)
    for name, value in _beat_values(
        grace=grace_s(host, settings),
        offset=host.clock_offset_s,
        now=now,
        sent_at=sent_at,
        backlog_bytes=backlog_bytes,
        agent=agent,
    ).items():
        setattr(host, name, value)
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
