"""A test notification to one target, sent now and outside the outbox.

It says it is a test in every format (``"type": "test"``, a ``[TEST]`` title, Apprise's info
level), never enters the outbox, and so never counts as an alert anywhere: not in an
incident's deliveries, not in the metrics, not in a receiver's idempotency keys of real events.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime

import httpx
from sqlalchemy.orm import Session, sessionmaker

from collector.alerts import notify
from collector.alerts.delivery import headers_for, post_body
from collector.alerts.notice import Notice
from collector.alerts.outbox import body_for
from collector.alerts.targets import get_target
from collector.db import session_scope
from collector.models import Delivery
from collector.schemas import OutModel
from collector.settings import Settings

EVENT = "test"


class TrialOut(OutModel):
    """How the test send went (``status`` the HTTP answer where there is one); ``msg_id`` is the
    Standard Webhooks id it carried, ``event`` is ``test``."""

    ok: bool
    status: int | None
    error: str | None
    msg_id: str
    event: str


def trial_notice(settings: Settings) -> Notice:
    return Notice(
        title="[TEST] freezewatch test notification",
        body=(
            "This is a test from the freezewatch collector at "
            f"{settings.base_url}: no host is down. Alerts for this target will look like "
            "this one, without [TEST]."
        ),
        level="info",
    )


def send_test(
    factory: sessionmaker[Session],
    *,
    target_id: int,
    now: datetime,
    http_client: httpx.Client,
    settings: Settings,
) -> TrialOut:
    """Send the test to the target (enabled or not).

    The target is read in a transaction of its own and sent to after it ended, as the outbox
    does: a slow receiver must not hold the database.
    """
    with session_scope(factory) as session:
        target = get_target(session, target_id=target_id)
        session.expunge(target)
    notice = trial_notice(settings)
    msg_id = f"msg_test_{uuid.uuid4().hex}"
    payload = {
        "type": EVENT,
        "event": EVENT,
        "test": True,
        "timestamp": now.isoformat(),
        "message": notice.body,
        "url": settings.base_url,
    }
    text = f"{notice.title}: {notice.body}"
    body = json.dumps(
        body_for(target.format, payload=payload, text=text, notice=notice), separators=(",", ":")
    )
    if target.format == notify.APPRISE:
        outcome = notify.send_notice(target.url, notice)
    else:
        headers = headers_for(target, Delivery(msg_id=msg_id, body=body), now)
        outcome = post_body(http_client, target.url, body, headers, settings)
    return TrialOut.model_validate({**outcome, "msg_id": msg_id, "event": EVENT})
