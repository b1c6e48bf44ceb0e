"""Where alerts go: webhook targets from FREEZEWATCH_WEBHOOK_URLS (read-only) and the API."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.errors import Conflict, NotFound
from collector.models import WebhookTarget
from collector.settings import Settings

FORMATS = ("json", "slack")


def parse_target_spec(spec: str) -> dict[str, Any]:
    """``URL``, optionally ``URL|slack`` or ``URL|json|whsec_...`` (FREEZEWATCH_WEBHOOK_URLS)."""
    url, *rest = [p.strip() for p in spec.split("|")]
    fmt = rest[0] if rest and rest[0] else "json"
    secret = rest[1] if len(rest) > 1 and rest[1] else None
    if fmt not in FORMATS:
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


def list_targets(session: Session) -> list[WebhookTarget]:
    return list(session.scalars(select(WebhookTarget).order_by(WebhookTarget.id)))


def get_target(session: Session, *, target_id: int) -> WebhookTarget:
    target = session.get(WebhookTarget, target_id)
    if target is None:
        raise NotFound(f"no webhook {target_id}")
    return target


def create_target(
    session: Session, *, url: str, format: str, secret: str | None, enabled: bool
) -> WebhookTarget:
    target = WebhookTarget(source="api", url=url, format=format, secret=secret, enabled=enabled)
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
    for key, value in changes.items():
        setattr(target, key, (value or None) if key == "secret" else value)
    session.flush()
    return target


def delete_target(session: Session, *, target_id: int) -> None:
    session.delete(_editable(get_target(session, target_id=target_id), "remove"))
    session.flush()
