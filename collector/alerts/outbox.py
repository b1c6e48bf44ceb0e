"""Alert events into the outbox: one delivery row per (event, target), in the caller's transaction.

The outbox row is written in the same transaction as the state change that caused it, so an
alert exists exactly when the incident does; ``(target_id, dedup_key)`` is unique, so even two
racing writers cannot queue one event twice. ``webhooks.deliver_due_alerts`` sends them.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from collector.kernel.classify import GPU_FAULT_KINDS
from collector.models import Delivery, Host, Incident, Line, Sample, WebhookTarget
from collector.readback.series import line_dict, sample_dict
from collector.settings import Settings

if TYPE_CHECKING:  # telemetry_ingest reaches alerts through ingest
    from collector.ingest.derive import NewKernelEvent

log = logging.getLogger(__name__)

EVENTS = ("incident.opened", "incident.resolved", "kernel.event")
LAST_KERNEL_LINES = 20


def parse_target_spec(spec: str) -> dict[str, Any]:
    """``URL``, optionally ``URL|slack`` or ``URL|json|whsec_...`` (FREEZEWATCH_WEBHOOK_URLS)."""
    url, *rest = [p.strip() for p in spec.split("|")]
    fmt = rest[0] if rest and rest[0] else "json"
    secret = rest[1] if len(rest) > 1 and rest[1] else None
    if fmt not in ("json", "slack"):
        raise ValueError(f"webhook format must be json or slack, not {fmt!r}")
    return {"url": url, "format": fmt, "secret": secret}


def sync_env_targets(session: Session, *, settings: Settings) -> list[WebhookTarget]:
    """Make the ``source='env'`` targets match FREEZEWATCH_WEBHOOK_URLS (API targets untouched)."""
    wanted = [parse_target_spec(s) for s in settings.webhook_urls.split(",") if s.strip()]
    existing = list(session.scalars(select(WebhookTarget).where(WebhookTarget.source == "env")))
    by_url = {t.url: t for t in existing}
    kept = []
    for spec in wanted:
        target = by_url.pop(spec["url"], None)
        if target is None:
            target = WebhookTarget(source="env", **spec)
            session.add(target)
        else:
            target.format, target.secret, target.enabled = spec["format"], spec["secret"], True
        kept.append(target)
    for stale in by_url.values():
        stale.enabled = False  # keep its delivery history
    session.flush()
    return kept


def enqueue(
    session: Session,
    *,
    event: str,
    dedup_key: str,
    payload: dict[str, Any],
    text: str,
    now: datetime,
    host_id: int | None = None,
    incident_id: int | None = None,
) -> int:
    """Queue ``payload`` for every enabled target; returns how many rows were queued."""
    targets = list(session.scalars(select(WebhookTarget).where(WebhookTarget.enabled)))
    rows = []
    for target in targets:
        body = payload if target.format == "json" else {"text": text}
        rows.append(
            {
                "msg_id": f"msg_{uuid.uuid4().hex}",
                "target_id": target.id,
                "dedup_key": dedup_key,
                "event": event,
                "host_id": host_id,
                "incident_id": incident_id,
                "body": json.dumps(body, separators=(",", ":"), default=str),
                "state": "pending",
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
                "log": [],
            }
        )
    # A few rows (one per target): per-row statements keep rowcount exact on both databases.
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stored = sum(
        session.execute(insert(Delivery).values(**row).on_conflict_do_nothing()).rowcount
        for row in rows
    )
    if stored:
        log.info("queued %s (%s) for %d target(s)", event, dedup_key, stored)
    return stored


def _last_sample(session: Session, host_id: int) -> dict[str, Any] | None:
    sample = session.scalar(
        select(Sample).where(Sample.host_id == host_id).order_by(Sample.ts.desc()).limit(1)
    )
    return sample_dict(sample) if sample else None


def _last_kernel_lines(session: Session, host_id: int) -> list[dict[str, Any]]:
    lines = session.scalars(
        select(Line)
        .where(Line.host_id == host_id, Line.source.in_(("kmsg", "netconsole")))
        .order_by(Line.ts.desc(), Line.id.desc())
        .limit(LAST_KERNEL_LINES)
    )
    return [line_dict(x) for x in lines][::-1]


def incident_link(settings: Settings, incident_id: int) -> str:
    return f"{settings.base_url.rstrip('/')}/incidents/{incident_id}"


def enqueue_incident(
    session: Session,
    *,
    event: str,
    incident: Incident,
    host: Host,
    now: datetime,
    settings: Settings,
) -> int:
    from collector.incidents.lifecycle import incident_dict, kernel_alive, kernel_alive_text

    link = incident_link(settings, incident.id)
    alive = kernel_alive(session, incident=incident)
    summary = incident_dict(incident, host_name=host.name)
    if alive is not None:  # known only once netconsole brought a line after the last heartbeat
        summary["kernel_alive"] = alive
    payload = {
        "type": event,
        "event": event,
        "timestamp": now.isoformat(),
        "host": {"name": host.name, "status": host.status, "boot_id": host.current_boot_id},
        "incident": summary,
        "last_sample": _last_sample(session, host.id),
        "kernel_lines": _last_kernel_lines(session, host.id),
        "url": link,
    }
    if event == "incident.opened":
        text = f"freezewatch: {host.name} is silent ({incident.kind}) — {link}"
    else:
        extra = f", stalled {incident.stall_s:.1f} s" if incident.stall_s else ""
        text = f"freezewatch: {host.name} is back ({incident.resolution}{extra}) — {link}"
    if alive is not None:
        text += f" ({kernel_alive_text(alive)})"
    return enqueue(
        session,
        event=event,
        dedup_key=f"{event}:{incident.id}",
        payload=payload,
        text=text,
        now=now,
        host_id=host.id,
        incident_id=incident.id,
    )


def enqueue_kernel_events(
    session: Session,
    *,
    host: Host,
    events: list[NewKernelEvent],
    boot_id: str,
    now: datetime,
    settings: Settings,
) -> int:
    """One ``kernel.event`` per GPU-fault kind among the batch's new kernel events, at most
    one per kind and cooldown."""
    faults = [e for e in events if e.kind in GPU_FAULT_KINDS]
    if not faults:
        return 0
    lines = {
        line.id: line
        for line in session.scalars(select(Line).where(Line.id.in_([e.line_id for e in faults])))
    }
    by_kind: dict[str, list[tuple[Line, NewKernelEvent]]] = {}
    for event in sorted(faults, key=lambda e: e.ts):
        if event.line_id in lines:
            by_kind.setdefault(event.kind, []).append((lines[event.line_id], event))
    queued = 0
    cooldown = now - timedelta(seconds=settings.kernel_alert_cooldown_s)
    for kind, hits in by_kind.items():
        recent = session.scalar(
            select(Delivery.id)
            .where(
                Delivery.host_id == host.id,
                Delivery.event == "kernel.event",
                Delivery.dedup_key.like(f"kernel.event:{kind}:%"),
                Delivery.created_at > cooldown,
            )
            .limit(1)
        )
        if recent is not None:
            continue
        first_line, first = hits[0]
        payload = {
            "type": "kernel.event",
            "event": "kernel.event",
            "timestamp": now.isoformat(),
            "host": {"name": host.name, "status": host.status, "boot_id": boot_id},
            "kernel_event": kernel_event_dict(first),
            "count": len(hits),
            "lines": [line_dict(x) for x, _ in hits[:20]],
            "last_sample": _last_sample(session, host.id),
            "kernel_lines": _last_kernel_lines(session, host.id),
            "url": f"{settings.base_url.rstrip('/')}/hosts/{host.name}",
        }
        text = f"freezewatch: {host.name} kernel {kind}: {first_line.text[:300]}"
        queued += enqueue(
            session,
            event="kernel.event",
            dedup_key=f"kernel.event:{kind}:{first_line.id}",
            payload=payload,
            text=text,
            now=now,
            host_id=host.id,
        )
    return queued


KERNEL_EVENT_FIELDS = (
    "kind", "ts", "xid", "pci", "pid", "process", "meaning", "nv_err", "call_site",
    "vllm_phase", "vllm_line",
)  # fmt: skip


def kernel_event_dict(event: NewKernelEvent) -> dict[str, Any]:
    values = {name: getattr(event, name) for name in KERNEL_EVENT_FIELDS}
    return {name: value for name, value in values.items() if value is not None}
