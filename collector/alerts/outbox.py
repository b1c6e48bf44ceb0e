"""Finished alert payloads into the outbox: one delivery row per (event, target).

The row is written in the caller's transaction, with the state change that caused it, so an
alert exists exactly when its cause does; ``(target_id, dedup_key)`` is unique, so even two
racing writers cannot queue one event twice. The outbox knows no incident or kernel event: its
callers build the payload. ``collector.alerts.delivery`` sends the rows.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector import db
from collector.models import Delivery, DeliveryState, WebhookTarget

log = logging.getLogger(__name__)

EVENTS = ("incident.opened", "incident.resolved", "kernel.event", "guard.fired")


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
    """Queue ``payload`` (``{"text": text}`` for Slack-style targets) for every enabled
    target; returns how many rows were queued."""
    targets = list(session.scalars(select(WebhookTarget).where(WebhookTarget.enabled)))
    stored = 0
    for target in targets:
        body = payload if target.format == "json" else {"text": text}
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
        # A few rows (one per target): per-row statements keep rowcount exact on both engines.
        insert = db.insert(session, Delivery).values(**row).on_conflict_do_nothing()
        stored += session.execute(insert).rowcount
    if stored:
        log.info("queued %s (%s) for %d target(s)", event, dedup_key, stored)
    return stored


def queued_since(
    session: Session, *, host_id: int, event: str, key_prefix: str, since: datetime
) -> bool:
    """Whether an ``event`` with a dedup key starting ``key_prefix`` was queued for the host
    after ``since`` (an alert cooldown)."""
    found = session.scalar(
        select(Delivery.id)
        .where(
            Delivery.host_id == host_id,
            Delivery.event == event,
            Delivery.dedup_key.startswith(key_prefix, autoescape=True),
            Delivery.created_at > since,
        )
        .limit(1)
    )
    return found is not None
