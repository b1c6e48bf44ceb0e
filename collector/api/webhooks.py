"""Alert targets CRUD and test sends (admin token); targets from FREEZEWATCH_WEBHOOK_URLS are
read-only. A target is a signed JSON webhook, a Slack-style webhook, or an Apprise URL."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import Field, model_validator

from collector.alerts import targets, trial
from collector.alerts.filters import SEVERITIES
from collector.alerts.targets import TargetOut
from collector.alerts.trial import TrialOut
from collector.deps import (
    AdminBriefDep,
    AdminDep,
    HttpClientDep,
    NowDep,
    SessionDep,
    SessionFactoryDep,
    SettingsDep,
)
from collector.params import RowId
from collector.schemas import InModel

router = APIRouter(prefix="/api/v1/webhooks", tags=["webhooks"])

Format = Literal["json", "slack", "apprise"]
Severity = Literal[SEVERITIES]  # type: ignore[valid-type]


class WebhookIn(InModel):
    url: str = Field(min_length=1, description="http(s) URL; for format apprise an Apprise URL")
    format: Format = "json"
    secret: str | None = Field(None, pattern=r"^whsec_[A-Za-z0-9+/=]+$")
    enabled: bool = True
    events: list[str] | None = Field(
        None, description="event patterns, e.g. ['incident.*', 'kernel.event']; null: all"
    )
    min_severity: Severity | None = Field(None, description="kernel.event severity floor")

    @model_validator(mode="after")
    def _valid_target(self) -> WebhookIn:
        targets.check_target(
            url=self.url, format=self.format, events=self.events, min_severity=self.min_severity
        )
        return self


class WebhookPatch(InModel):
    url: str | None = Field(None, min_length=1)
    format: Format | None = None
    secret: str | None = Field(None, pattern=r"^(whsec_[A-Za-z0-9+/=]+)?$")
    enabled: bool | None = None
    events: list[str] | None = None
    min_severity: Severity | None = None


@router.get("")
def list_webhooks(session: SessionDep, _: AdminDep) -> list[TargetOut]:
    return [TargetOut.of(t) for t in targets.list_targets(session)]


@router.post("", status_code=201)
def create_webhook(body: WebhookIn, session: SessionDep, _: AdminDep) -> TargetOut:
    return TargetOut.of(targets.create_target(session, **body.model_dump()))


@router.get("/{target_id}")
def get_webhook(target_id: RowId, session: SessionDep, _: AdminDep) -> TargetOut:
    return TargetOut.of(targets.get_target(session, target_id=target_id))


@router.patch("/{target_id}")
def patch_webhook(
    target_id: RowId, body: WebhookPatch, session: SessionDep, _: AdminDep
) -> TargetOut:
    changes = body.model_dump(exclude_unset=True)
    return TargetOut.of(targets.update_target(session, target_id=target_id, changes=changes))


@router.delete("/{target_id}", status_code=204)
def delete_webhook(target_id: RowId, session: SessionDep, _: AdminDep) -> None:
    targets.delete_target(session, target_id=target_id)


@router.post("/{target_id}/test")
def test_webhook(
    target_id: RowId,
    factory: SessionFactoryDep,
    settings: SettingsDep,
    http_client: HttpClientDep,
    now: NowDep,
    _: AdminBriefDep,
) -> TrialOut:
    """Send a test notification now (marked as a test; not an alert, not in the outbox)."""
    return trial.send_test(
        factory, target_id=target_id, now=now, http_client=http_client, settings=settings
    )
