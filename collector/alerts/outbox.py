"""Finished alert payloads into the outbox: one delivery row per (event, target).

The row is written in the caller's transaction, with the state change that caused it, so an
alert exists exactly when its cause does; ``(target_id, dedup_key)`` is unique, so even two
racing writers cannot queue one event twice. The outbox knows no incident or kernel event: its
callers build the payload. ``collector.alerts.delivery`` sends the rows.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, String, bindparam, select
from sqlalchemy.orm import Session

from collector import db
from collector.alerts.filters import wants
from collector.alerts.notice import Notice
from collector.models import Delivery, DeliveryState, WebhookTarget
from collector.prepared import Prepared

log = logging.getLogger(__name__)


def body_for(target_format: str, *, payload: dict[str, Any], text: str, notice: Notice) -> Any:
    """What a target of this format is sent: the JSON payload, Slack's ``{"text"}``, or the
    notice for Apprise."""
    if target_format == "json":
        return payload
    if target_format == "slack":
        return {"text": text}
    return notice.as_dict()


def enqueue(
    session: Session,
    *,
    event: str,
    dedup_key: str,
    payload: dict[str, Any],
    text: str,
    notice: Notice,
    now: datetime,
    severity: str | None = None,
    host_id: int | None = None,
    incident_id: int | None = None,
) -> int:
    """Queue the event for every enabled target whose filter takes it (``severity`` for
    kernel events); returns how many rows were queued."""
    targets = list(session.scalars(select(WebhookTarget).where(WebhookTarget.enabled)))
    stored = 0
    for target in targets:
        if not wants(target.events, target.min_severity, event=event, severity=severity):
            continue
        body = body_for(target.format, payload=payload, text=text, notice=notice)
        row = {
            "msg_id": f"msg_{uuid.uuid4().hex}",
            "target_id": target.id,
            "dedup_key": dedup_key,
            "event": event,
            "host_id": host_id,
            "incident_id": incident_id,
            "body": json.dumps(body, separators=(",", ":"), default=str),
            "state": DeliveryState.PENDING,
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
            "log": [],
        }
        # A few rows (one per target), one statement each. Counted by what RETURNING gives
        # back: on PostgreSQL an INSERT with (implicit) RETURNING reports rowcount -1.
        insert = db.insert(session, Delivery).values(**row).on_conflict_do_nothing()
        stored += len(session.execute(insert.returning(Delivery.id)).all())
    if stored:
        log.info("queued %s (%s) for %d target(s)", event, dedup_key, stored)
        db.after_commit(session, QUEUED.set)
    return stored


# Set once this process committed a queued delivery: the delivery tick then reads the outbox
# afresh (within its tick), and otherwise answers from the scheduler's shared reading of due
# times, which sees other processes' rows within ``due.MAX_AGE_S``.
QUEUED = threading.Event()


def queued_since(
    session: Session, *, host_id: int, event: str, key_prefix: str, since: datetime
) -> bool:
    """Whether an ``event`` with a dedup key starting ``key_prefix`` was queued for the host
    after ``since`` (an alert cooldown). Asked in every batch of an Xid storm."""
    return (
        queued_key_since(session, host_id=host_id, event=event, key_prefix=key_prefix, since=since)
        is not None
    )


def queued_key_since(
    session: Session, *, host_id: int, event: str, key_prefix: str, since: datetime
) -> str | None:
    """The dedup key of such an ``event`` (``queued_since``), or None."""
    pattern = "".join("/" + c if c in "/%_" else c for c in key_prefix) + "%"  # ESCAPE '/'
    found = _QUEUED_SINCE.first(session, host_id=host_id, event=event, pattern=pattern, since=since)
    return None if found is None else str(found[0])


_QUEUED_SINCE = Prepared(
    select(Delivery.dedup_key)
    .where(
        Delivery.host_id == bindparam("host_id", type_=Integer),
        Delivery.event == bindparam("event", type_=String),
        Delivery.dedup_key.like(bindparam("pattern", type_=String), escape="/"),
        Delivery.created_at > bindparam("since", type_=Delivery.created_at.type),
    )
    .limit(1)
)
