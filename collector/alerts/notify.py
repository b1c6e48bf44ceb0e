"""Sending one alert through Apprise (ntfy, Discord, Telegram, e-mail, PagerDuty, Teams, ...).

The outbox row's body is a stored ``Notice``; the outcome has the shape of a webhook POST's
(``ok``, ``status``, ``error``), so retries, backoff and the delivery log are the same for both.
Apprise answers only true or false; its log lines during the call say why it failed.
"""

from __future__ import annotations

import json
import logging

import apprise

from collector.alerts.notice import Notice

log = logging.getLogger(__name__)

APPRISE = "apprise"
MAX_ERROR = 500


def _asset() -> apprise.AppriseAsset:
    # Nothing on disk: Apprise's persistent store would cache per-service state under $HOME.
    return apprise.AppriseAsset(storage_mode="memory")


def valid_url(url: str) -> bool:
    """Whether Apprise knows the URL's service and can parse it."""
    return apprise.Apprise.instantiate(url, asset=_asset()) is not None


def redacted(url: str) -> str:
    """The URL as Apprise prints it with its secrets masked, without its options (what the API
    shows)."""
    plugin = apprise.Apprise.instantiate(url, asset=_asset())
    if plugin is None:
        return url.partition("://")[0] + "://…"
    return str(plugin.url(privacy=True)).partition("?")[0]


def send_notice(url: str, notice: Notice) -> dict[str, object]:
    """Notify the service at ``url``; returns ``{"ok", "status": None, "error"}``."""
    client = apprise.Apprise(asset=_asset())
    if not client.add(url):
        return {"ok": False, "status": None, "error": "Apprise does not accept this URL"}
    with apprise.LogCapture(level=logging.WARNING, fmt="%(message)s") as captured:
        try:
            ok = bool(
                client.notify(
                    body=notice.body,
                    title=notice.title,
                    notify_type=apprise.NotifyType(notice.level),
                )
            )
        except Exception as exc:  # a plugin bug must not kill the delivery loop
            log.exception("apprise raised")
            error = f"{type(exc).__name__}: {exc}"
            return {"ok": False, "status": None, "error": error[:MAX_ERROR]}
        detail = " ".join(captured.getvalue().split())
    if ok:
        return {"ok": True, "status": None, "error": None}
    error = detail or "Apprise reported a failure"
    return {"ok": False, "status": None, "error": error[-MAX_ERROR:]}


def send_body(url: str, body: str) -> dict[str, object]:
    """Send an outbox row's stored body (a ``Notice`` as JSON)."""
    return send_notice(url, Notice.from_dict(json.loads(body)))
