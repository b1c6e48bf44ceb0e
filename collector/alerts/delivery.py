"""Delivering the alert outbox: claim a due row by conditional UPDATE, POST it signed (or hand
it to Apprise, ``collector.alerts.notify``), record.

Signing follows Standard Webhooks: ``webhook-id`` (the row's msg_id, stable across retries, the
receiver's idempotency key), ``webhook-timestamp`` and ``webhook-signature: v1,<base64
HMAC-SHA256(secret, "id.timestamp.body")>`` where the secret is the base64 part of ``whsec_...``.
Failures retry with exponential backoff and full jitter until ``webhook_retry_window_s`` after
the event, then the row is ``failed``.

Delivery is at least once: a sender killed after its POST went out but before it recorded the
answer leaves the row ``sending``; once its lease (as long as the POST can take, plus
``LEASE_MARGIN_S``) runs out the row is sent again, with the same ``webhook-id`` (receivers
that must not post twice key on it). Order is kept per incident and target: an
``incident.resolved`` is not due while its ``incident.opened`` is still pending or being sent,
so a retried opened never arrives after its resolved.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import random
import secrets
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import exists, or_, select, update
from sqlalchemy.orm import Session, aliased, sessionmaker
from sqlalchemy.sql.expression import ColumnElement

from collector.alerts import notify
from collector.db import changed_rows, read_scope, session_scope
from collector.models import Delivery, DeliveryState, WebhookTarget
from collector.schemas import OutModel
from collector.settings import Settings

log = logging.getLogger(__name__)

USER_AGENT = "freezewatch-collector"
MAX_LOG_ENTRIES = 50
# A claim outlives the POST's timeout by this much; then a dead sender's row is sent again.
LEASE_MARGIN_S = 5.0
UNSETTLED = (DeliveryState.PENDING, DeliveryState.SENDING)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_key(secret: str) -> bytes:
    raw = secret.removeprefix("whsec_")
    return base64.b64decode(raw + "=" * (-len(raw) % 4))


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    digest = hmac.new(
        secret_key(secret), f"{msg_id}.{timestamp}.{body}".encode(), hashlib.sha256
    ).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers_for(target: WebhookTarget, delivery: Delivery, now: datetime) -> dict[str, str]:
    timestamp = int(now.timestamp())
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": delivery.msg_id,
        "webhook-timestamp": str(timestamp),
    }
    if target.secret:
        headers["webhook-signature"] = sign(
            target.secret, delivery.msg_id, timestamp, delivery.body
        )
    return headers


def backoff_s(attempts: int, settings: Settings, rng: random.Random) -> float:
    """Full jitter over an exponentially growing ceiling (base · 2^(n-1), capped)."""
    ceiling = min(
        settings.webhook_backoff_max_s, settings.webhook_backoff_base_s * 2 ** (attempts - 1)
    )
    return max(0.5, rng.uniform(ceiling / 2, ceiling))


def _due(now: datetime) -> ColumnElement[bool]:
    """Pending and due, or claimed by a sender that died mid-request (its lease ran out); a
    resolved waits for its opened (same incident and target) to be delivered or given up."""
    opened = aliased(Delivery)
    opened_unsettled = exists().where(
        opened.incident_id == Delivery.incident_id,
        opened.target_id == Delivery.target_id,
        opened.event == "incident.opened",
        opened.state.in_(UNSETTLED),
    )
    return or_(
        (Delivery.state == DeliveryState.PENDING) & (Delivery.next_attempt_at <= now),
        (Delivery.state == DeliveryState.SENDING) & (Delivery.claimed_until <= now),
    ) & ~((Delivery.event == "incident.resolved") & opened_unsettled)


def lease_s(settings: Settings) -> float:
    """How long a claim holds: the longest a POST takes (its timeout bounds connecting and
    waiting for the answer, each) plus a margin."""
    return 2 * settings.webhook_timeout_s + LEASE_MARGIN_S


def _claim(session: Session, delivery_id: int, now: datetime, settings: Settings) -> bool:
    lease = now + timedelta(seconds=lease_s(settings))
    result = changed_rows(
        session,
        update(Delivery)
        .where(Delivery.id == delivery_id, _due(now))
        .values(state=DeliveryState.SENDING, claimed_until=lease, attempts=Delivery.attempts + 1)
        .execution_options(synchronize_session=False),
    )
    return result == 1


def deliver_due_alerts(
    session_factory: sessionmaker[Session],
    *,
    now: datetime,
    http_client: httpx.Client,
    settings: Settings,
    limit: int = 100,
    rng: random.Random | None = None,
) -> list[int]:
    """Send every due outbox row once; returns the ids delivered in this step."""
    rng = rng or random.Random()
    with read_scope(session_factory) as session:  # the claims below take the write lock
        due = list(
            session.scalars(
                select(Delivery.id).where(_due(now)).order_by(Delivery.next_attempt_at).limit(limit)
            )
        )
    delivered = []
    for delivery_id in due:
        with session_scope(session_factory) as session:
            if not _claim(session, delivery_id, now, settings):
                continue  # another worker has it
            delivery = session.get(Delivery, delivery_id, populate_existing=True)
            target = session.get(WebhookTarget, delivery.target_id) if delivery else None
            assert delivery is not None and target is not None
            attempt, url, request_headers = (
                delivery.attempts,
                target.url,
                headers_for(target, delivery, now),
            )
            body, target_format = delivery.body, target.format
        if target_format == notify.APPRISE:
            outcome = notify.send_body(url, body)
        else:
            outcome = post_body(http_client, url, body, request_headers, settings)
        with session_scope(session_factory) as session:
            if _record(session, delivery_id, attempt, outcome, now, settings, rng):
                delivered.append(delivery_id)
    return delivered


def post_body(
    client: httpx.Client, url: str, body: str, headers: dict[str, str], settings: Settings
) -> dict[str, Any]:
    try:
        response = client.post(
            url, content=body.encode(), headers=headers, timeout=settings.webhook_timeout_s
        )
    except httpx.HTTPError as exc:
        return {"ok": False, "status": None, "error": f"{type(exc).__name__}: {exc}"[:500]}
    ok = 200 <= response.status_code < 300
    return {
        "ok": ok,
        "status": response.status_code,
        "error": None if ok else f"HTTP {response.status_code}: {response.text[:300]}",
    }


def _record(
    session: Session,
    delivery_id: int,
    attempt: int,
    outcome: dict[str, Any],
    now: datetime,
    settings: Settings,
    rng: random.Random,
) -> bool:
    delivery = session.get(Delivery, delivery_id, populate_existing=True)
    if delivery is None or delivery.state != DeliveryState.SENDING or delivery.attempts != attempt:
        return False  # our lease expired and someone else took over
    entry = {"at": now.timestamp(), "attempt": attempt, **outcome}
    delivery.log = [*delivery.log, entry][-MAX_LOG_ENTRIES:]
    delivery.last_status = outcome["status"]
    delivery.last_error = outcome["error"]
    delivery.claimed_until = None
    if outcome["ok"]:
        delivery.state = DeliveryState.DELIVERED
        delivery.delivered_at = now
        log.info("delivered %s %s (attempt %d)", delivery.event, delivery.msg_id, attempt)
        return True
    retry_at = now + timedelta(seconds=backoff_s(attempt, settings, rng))
    if retry_at > delivery.created_at + timedelta(seconds=settings.webhook_retry_window_s):
        delivery.state = DeliveryState.FAILED
        log.error("giving up on %s %s: %s", delivery.event, delivery.msg_id, outcome["error"])
    else:
        delivery.state = DeliveryState.PENDING
        delivery.next_attempt_at = retry_at
        log.warning(
            "delivery %s %s failed (attempt %d, %s); retry at %s",
            delivery.event,
            delivery.msg_id,
            attempt,
            outcome["error"],
            retry_at.isoformat(),
        )
    return False


class DeliveryOut(OutModel):
    """One outbox row: an event for one target (``target`` its URL), and every attempt in
    ``log``."""

    id: int
    msg_id: str
    event: str
    target: str | None
    state: DeliveryState
    attempts: int
    next_attempt_at: float
    delivered_at: float | None
    last_status: int | None
    last_error: str | None
    log: list[dict[str, Any]]

    @classmethod
    def of(cls, delivery: Delivery, target_url: str | None = None) -> DeliveryOut:
        return cls.model_validate(
            {
                "id": delivery.id,
                "msg_id": delivery.msg_id,
                "event": delivery.event,
                "target": target_url,
                "state": delivery.state,
                "attempts": delivery.attempts,
                "next_attempt_at": delivery.next_attempt_at.timestamp(),
                "delivered_at": delivery.delivered_at.timestamp()
                if delivery.delivered_at
                else None,
                "last_status": delivery.last_status,
                "last_error": delivery.last_error,
                "log": delivery.log,
            }
        )
