"""A test notification to one target, sent now and outside the outbox.

It says it is a test in every format (``"type": "test"``, a ``[TEST]`` title, Apprise's info
level), never enters the outbox, and so never counts as an alert anywhere: not in an
incident's deliveries, not in the metrics, not in a receiver's idempotency keys of real events.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import httpx

from collector.alerts import notify
from collector.alerts.delivery import headers_for, post_body
from collector.alerts.notice import Notice
from collector.alerts.outbox import body_for
from collector.models import Delivery, WebhookTarget
from collector.settings import Settings

EVENT = "test"


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
    target: WebhookTarget, *, now: datetime, http_client: httpx.Client, settings: Settings
) -> dict[str, Any]:
    """Send the test to ``target`` (enabled or not); ``{"ok", "status", "error", "msg_id"}``."""
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
    return {**outcome, "msg_id": msg_id, "event": EVENT}
