"""A guard firing alerts at once (``guard.fired``): the host was about to freeze, and the guard
stopped vLLM. Dry-run matches are shown, never alerted."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy.orm import Session

from collector import links
from collector.alerts import outbox
from collector.alerts.notice import Notice, lines
from collector.guard.report import note_guard_reports
from collector.models import Host
from collector.readback.guard_events import firing_text
from collector.readback.series import recent_evidence
from collector.schemas import WireEvent
from collector.settings import Settings

EVENT = "guard.fired"


def enqueue_guard_fired(
    session: Session,
    *,
    host: Host,
    events: Iterable[WireEvent],
    boot_id: str,
    now: datetime,
    settings: Settings,
) -> int:
    """One ``guard.fired`` per firing (its ``fire_id`` is the dedup key: a replayed batch
    alerts nothing new); returns how many deliveries were queued."""
    queued = 0
    for event in events:
        data = event.data
        if event.kind != "guard_fired" or data.get("dry_run"):
            continue
        url = links.absolute(settings, links.host_url(host.name))
        what = firing_text(data)
        payload = {
            "type": EVENT,
            "event": EVENT,
            "timestamp": now.isoformat(),
            "host": {"name": host.name, "status": host.status, "boot_id": boot_id},
            "guard": {
                "ts": event.ts,
                "fire_id": data.get("fire_id"),
                "rule": data.get("rule"),
                "values": data.get("values"),
                "phase": data.get("phase"),
                "actions": data.get("actions"),
            },
            **recent_evidence(session, host_id=host.id).model_dump(mode="json"),
            "url": url,
        }
        queued += outbox.enqueue(
            session,
            event=EVENT,
            dedup_key=f"{EVENT}:{boot_id}:{data.get('fire_id') or event.seq}",
            payload=payload,
            text=f"freezewatch: {host.name} {what}"[:1000],
            notice=Notice(
                title=f"freezewatch: {host.name} guard fired",
                body=lines(f"{host.name}: {what}"[:1000], f"Host status: {host.status}", url),
                level="warning",
            ),
            now=now,
            host_id=host.id,
        )
    return queued


def note_guard_events(
    session: Session,
    *,
    host: Host,
    events: list[WireEvent],
    boot_id: str,
    now: datetime,
    settings: Settings,
) -> None:
    """What a batch's agent events say about the guard: its reported state, its firings."""
    if not events:
        return
    note_guard_reports(host, events)
    enqueue_guard_fired(
        session, host=host, events=events, boot_id=boot_id, now=now, settings=settings
    )
