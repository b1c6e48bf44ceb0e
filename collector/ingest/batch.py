"""Storing one validated batch in the caller's transaction; duplicates ignored by unique keys.

The raw records first (samples, lines, agent events), then what they imply (``derive``), then
the heartbeat the batch is, then the alerts its new GPU faults and guard firings raise.
"""

from __future__ import annotations

import hmac
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector import db
from collector.errors import AuthFailed
from collector.guard.alerting import note_guard_events
from collector.hosts.registry import ensure_boot_pk
from collector.ingest.derive import derive_from_batch
from collector.ingest.lines import store_lines
from collector.ingest.rows import EVENT_COLUMNS, SAMPLE_COLUMNS, sample_row, to_json
from collector.ingest.templates import SamplePacker
from collector.kernel.alerting import enqueue_kernel_events
from collector.liveness.heartbeat import Sender, beat, read_sender, record_heartbeat, stopping_event
from collector.models import CHANNEL_AGENT, AgentEvent, Host, Line, Sample, table_of
from collector.readback.downsample import refresh_rollups
from collector.schemas import Batch, IngestResult, StreamCounts
from collector.settings import Settings
from collector.vllm.state import VllmStates


def ingest_batch(
    session: Session,
    *,
    host_id: int,
    batch: Batch,
    received_at: float,
    now: datetime,
    settings: Settings,
    vllm_states: VllmStates | None = None,
    token_hash: str | None = None,
) -> IngestResult:
    """Store a batch from host ``host_id``; ``received_at``/``now`` are one reading of our clock.

    ``vllm_states``: the process's per-host vLLM state; without it, state is rebuilt from
    storage. ``token_hash``: the hash of the token the batch came with; when given, the host
    must still have it (``AuthFailed`` otherwise: rotated, or the host deleted, since the
    caller looked the token up).
    """
    sender = read_sender(session, host_id=host_id, boot_id=batch.boot_id)
    if sender is None or (
        token_hash is not None and not hmac.compare_digest(sender.token_hash, token_hash)
    ):
        raise AuthFailed("unknown host token")
    boot = sender.boot_pk
    if boot is None:
        boot = ensure_boot_pk(session, host_id=host_id, boot_id=batch.boot_id)
    common = (host_id, boot, received_at)

    packer = SamplePacker(session, host_id=host_id, received_at=received_at)
    samples_stored = db.insert_ignoring_duplicates(
        session,
        table_of(Sample),
        SAMPLE_COLUMNS,
        [sample_row(common, s, packer) for s in batch.samples],
    )
    if batch.samples:
        stamps = [s.ts for s in batch.samples]
        refresh_rollups(session, host_id=host_id, since=min(stamps), until=max(stamps))
    lines_stored = store_lines(session, common=common, batch=batch)
    events_stored = db.insert_ignoring_duplicates(
        session,
        table_of(AgentEvent),
        EVENT_COLUMNS,
        [(*common, e.seq, e.ts, e.kind, to_json(e.data)) for e in batch.events],
    )
    derived = derive_from_batch(
        session,
        host_id=host_id,
        boot_pk=boot,
        batch=batch,
        received_at=received_at,
        states=vllm_states,
        escalate_after=settings.kernel_escalate_after_reboots,
    )
    host = _heartbeat(session, sender=sender, batch=batch, now=now, settings=settings)
    if derived.kernel_events:
        enqueue_kernel_events(
            session,
            host_id=host_id,
            events=derived.kernel_events,
            boot_id=batch.boot_id,
            now=now,
            settings=settings,
        )
    if batch.events:
        note_guard_events(
            session,
            host=host or session.get_one(Host, host_id),
            events=batch.events,
            boot_id=batch.boot_id,
            now=now,
            settings=settings,
        )
    session.flush()

    stored = StreamCounts(samples=samples_stored, lines=lines_stored, events=events_stored)
    duplicates = StreamCounts(
        samples=len(batch.samples) - stored.samples,
        lines=len(batch.lines) - stored.lines,
        events=len(batch.events) - stored.events,
    )
    # Only a starting agent needs to know where to resume; every other batch skips the query.
    starting = any(e.kind == "agent_started" for e in batch.events)
    resume = {"kseq": resume_kseq(session, boot_pk=boot) if starting else None}
    return IngestResult(stored=stored, duplicates=duplicates, resume=resume)


def _heartbeat(
    session: Session, *, sender: Sender, batch: Batch, now: datetime, settings: Settings
) -> Host | None:
    """The batch as a heartbeat: one UPDATE in the common case, else the whole
    ``record_heartbeat`` on the host's ORM row (returned; None otherwise)."""
    heartbeat: dict[str, Any] = {
        "boot_id": batch.sender_boot_id,
        "now": now,
        "settings": settings,
        "stopping": stopping_event(batch),
        "sent_at": batch.agent.sent_at,
        "backlog_bytes": batch.backlog.bytes if batch.backlog is not None else None,
        "agent": batch.agent,
    }
    if beat(session, sender=sender, **heartbeat):
        return None
    host = session.get_one(Host, sender.id)
    record_heartbeat(session, host=host, **heartbeat)
    return host


def resume_kseq(session: Session, *, boot_pk: int) -> int | None:
    """The highest kernel record the agent has shipped for this boot (netconsole's don't count)."""
    return session.scalar(
        select(Line.kseq)
        .where(
            Line.boot_pk == boot_pk,
            Line.kseq.is_not(None),
            Line.channels.op("&")(CHANNEL_AGENT) != 0,
        )
        .order_by(Line.kseq.desc())
        .limit(1)
    )
