"""Webhook targets CRUD (admin token); targets from FREEZEWATCH_WEBHOOK_URLS are read-only."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field
from sqlalchemy import select

from collector.deps import AdminDep, SessionDep
from collector.errors import Conflict, NotFound
from collector.models import WebhookTarget

router = APIRouter(prefix="/api/v1/webhooks", tags=["webhooks"])


class WebhookIn(BaseModel):
    url: str = Field(min_length=1, pattern=r"^https?://")
    format: Literal["json", "slack"] = "json"
    secret: str | None = Field(None, pattern=r"^whsec_[A-Za-z0-9+/=]+$")
    enabled: bool = True


class WebhookPatch(BaseModel):
    url: str | None = Field(None, pattern=r"^https?://")
    format: Literal["json", "slack"] | None = None
    secret: str | None = Field(None, pattern=r"^(whsec_[A-Za-z0-9+/=]+)?$")
    enabled: bool | None = None


def target_dict(t: WebhookTarget) -> dict[str, Any]:
    # The secret is write-only: shown as set/unset.
    return {
        "id": t.id,
        "url": t.url,
        "format": t.format,
        "has_secret": bool(t.secret),
        "source": t.source,
        "enabled": t.enabled,
    }


def _get(session: SessionDep, target_id: int) -> WebhookTarget:
    target = session.get(WebhookTarget, target_id)
    if target is None:
        raise NotFound(f"no webhook {target_id}")
    return target


@router.get("")
def list_webhooks(session: SessionDep, _: AdminDep) -> list[dict[str, Any]]:
    return [
        target_dict(t) for t in session.scalars(select(WebhookTarget).order_by(WebhookTarget.id))
    ]


@router.post("", status_code=201)
def create_webhook(body: WebhookIn, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    target = WebhookTarget(source="api", **body.model_dump())
    session.add(target)
    session.flush()
    return target_dict(target)


@router.get("/{target_id}")
def get_webhook(target_id: int, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    return target_dict(_get(session, target_id))


@router.patch("/{target_id}")
def patch_webhook(
    target_id: int, body: WebhookPatch, session: SessionDep, _: AdminDep
) -> dict[str, Any]:
    target = _get(session, target_id)
    if target.source == "env":
        raise Conflict("this target comes from FREEZEWATCH_WEBHOOK_URLS; change it there")
    for key, value in body.model_dump(exclude_unset=True).items():
        setattr(target, key, value or None if key == "secret" else value)
    session.flush()
    return target_dict(target)


@router.delete("/{target_id}", status_code=204)
def delete_webhook(target_id: int, session: SessionDep, _: AdminDep) -> None:
    target = _get(session, target_id)
    if target.source == "env":
        raise Conflict("this target comes from FREEZEWATCH_WEBHOOK_URLS; remove it there")
    session.delete(target)
