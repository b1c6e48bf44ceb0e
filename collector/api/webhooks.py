"""Webhook targets CRUD (admin token); targets from FREEZEWATCH_WEBHOOK_URLS are read-only."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from collector.alerts import targets
from collector.deps import AdminDep, SessionDep
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


@router.get("")
def list_webhooks(session: SessionDep, _: AdminDep) -> list[dict[str, Any]]:
    return [target_dict(t) for t in targets.list_targets(session)]


@router.post("", status_code=201)
def create_webhook(body: WebhookIn, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    return target_dict(targets.create_target(session, **body.model_dump()))


@router.get("/{target_id}")
def get_webhook(target_id: int, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    return target_dict(targets.get_target(session, target_id=target_id))


@router.patch("/{target_id}")
def patch_webhook(
    target_id: int, body: WebhookPatch, session: SessionDep, _: AdminDep
) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True)
    return target_dict(targets.update_target(session, target_id=target_id, changes=changes))


@router.delete("/{target_id}", status_code=204)
def delete_webhook(target_id: int, session: SessionDep, _: AdminDep) -> None:
    targets.delete_target(session, target_id=target_id)
