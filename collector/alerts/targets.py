"""Where alerts go: targets from FREEZEWATCH_WEBHOOK_URLS (read-only) and the API.

A target is a signed JSON webhook, a Slack-style ``{"text"}`` webhook, or an Apprise URL, each
with an optional event filter (patterns, and a severity floor for kernel events).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.alerts import filters, notify
from collector.errors import BadRequest, Conflict, NotFound
from collector.models import WebhookTarget
from collector.schemas import OutModel
from collector.settings import Settings

FORMATS = ("json", "slack", notify.APPRISE)


def check_target(
    *, url: str, format: str, events: Sequence[str] | None, min_severity: str | None
) -> dict[str, Any]:
    """The target's fields, validated (ValueError says what is wrong)."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    if format == notify.APPRISE:
        if not notify.valid_url(url):
            raise ValueError("not an Apprise URL this collector can send to (e.g. ntfy://topic)")
    elif not url.startswith(("http://", "https://")):
        raise ValueError(f"a {format} target needs an http(s) URL")
    patterns = filters.check_patterns(events or [])
    return {
        "url": url,
        "format": format,
        "events": patterns or None,  # no patterns: every event
        "min_severity": filters.check_severity(min_severity),
    }


def parse_target_spec(spec: str) -> dict[str, Any]:
    """One FREEZEWATCH_WEBHOOK_URLS entry: ``URL`` then optional ``|``-separated parts: a format
    (``json``, ``slack``, ``apprise``), a ``whsec_...`` secret, ``events=incident.*;kernel.event``,
    ``min_severity=error``. A URL that is not http(s) is an Apprise URL."""
    url, *parts = [p.strip() for p in spec.split("|")]
    is_http = url.startswith(("http://", "https://"))
    fields: dict[str, Any] = {"format": "json" if is_http else notify.APPRISE, "secret": None}
    fields |= {"events": None, "min_severity": None}
    for part in filter(None, parts):
        key, eq, value = part.partition("=")
        if part.startswith("whsec_"):
            fields["secret"] = part
        elif eq and key in ("events", "min_severity"):
            fields[key] = [e for e in value.split(";") if e] if key == "events" else value
        elif not eq:
            fields["format"] = part
        else:
            raise ValueError(f"unknown webhook option {key!r} in {url.partition('://')[0]} entry")
    checked = check_target(
        url=url,
        format=fields["format"],
        events=fields["events"],
        min_severity=fields["min_severity"],
    )
    return {**checked, "secret": fields["secret"]}


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
            for key, value in spec.items():
                setattr(target, key, value)
            target.enabled = True
        kept.append(target)
    for stale in by_url.values():
        stale.enabled = False  # keep its delivery history
    session.flush()
    return kept


def list_targets(session: Session) -> list[WebhookTarget]:
    return list(session.scalars(select(WebhookTarget).order_by(WebhookTarget.id)))


def get_target(session: Session, *, target_id: int) -> WebhookTarget:
    target = session.get(WebhookTarget, target_id)
    if target is None:
        raise NotFound(f"no webhook {target_id}")
    return target


def _checked(**fields: Any) -> dict[str, Any]:
    try:
        return check_target(**fields)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def create_target(
    session: Session,
    *,
    url: str,
    format: str,
    secret: str | None,
    enabled: bool,
    events: Sequence[str] | None = None,
    min_severity: str | None = None,
) -> WebhookTarget:
    fields = _checked(url=url, format=format, events=events, min_severity=min_severity)
    target = WebhookTarget(source="api", secret=secret, enabled=enabled, **fields)
    session.add(target)
    session.flush()
    return target


def _editable(target: WebhookTarget, verb: str) -> WebhookTarget:
    if target.source == "env":
        raise Conflict(f"this target comes from FREEZEWATCH_WEBHOOK_URLS; {verb} it there")
    return target


def update_target(session: Session, *, target_id: int, changes: dict[str, Any]) -> WebhookTarget:
    """Apply the given fields; an empty ``secret`` removes the signing secret."""
    target = _editable(get_target(session, target_id=target_id), "change")
    merged = {
        key: changes.get(key, getattr(target, key))
        for key in ("url", "format", "events", "min_severity")
    }
    changes = {**changes, **_checked(**merged)}
    for key, value in changes.items():
        setattr(target, key, (value or None) if key == "secret" else value)
    session.flush()
    return target


def delete_target(session: Session, *, target_id: int) -> None:
    session.delete(_editable(get_target(session, target_id=target_id), "remove"))
    session.flush()


class TargetOut(OutModel):
    """An alert target as the API shows it: ``source`` is ``env`` (FREEZEWATCH_WEBHOOK_URLS,
    read-only) or ``api``; ``events`` its event patterns (null: every event)."""

    id: int
    url: str
    format: str
    has_secret: bool
    source: str
    enabled: bool
    events: list[str] | None
    min_severity: str | None

    @classmethod
    def of(cls, t: WebhookTarget) -> TargetOut:
        # Secrets are write-only: the signing secret shows as set/unset, an Apprise URL (which
        # carries the service's credentials) with them masked.
        apprise = t.format == notify.APPRISE
        return cls.model_validate(
            {
                "id": t.id,
                "url": notify.redacted(t.url) if apprise else t.url,
                "format": t.format,
                "has_secret": bool(t.secret),
                "source": t.source,
                "enabled": t.enabled,
                "events": t.events,
                "min_severity": t.min_severity,
            }
        )
