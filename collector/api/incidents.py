"""Incidents API: list, detail, post-mortem artifact download (admin token)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from collector.deps import AdminDep, SessionDep
from collector.services import incident_views

router = APIRouter(prefix="/api/v1/incidents", tags=["incidents"])


@router.get("")
def list_incidents(
    session: SessionDep,
    _: AdminDep,
    host: str | None = None,
    kind: str | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int = 500,
) -> list[dict[str, Any]]:
    return incident_views.list_incidents(
        session, host=host, kind=kind, since=since, until=until, limit=limit
    )


@router.get("/{incident_id}")
def get_incident(incident_id: int, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    return incident_views.incident_detail(session, incident_id=incident_id)


@router.get("/{incident_id}/artifacts/{name:path}")
def get_artifact(incident_id: int, name: str, session: SessionDep, _: AdminDep) -> Response:
    artifact = incident_views.get_artifact(session, incident_id=incident_id, name=name)
    headers = {
        "X-Exit-Status": "" if artifact.exit_status is None else str(artifact.exit_status),
        "X-Truncated": "1" if artifact.truncated else "0",
    }
    return Response(artifact.stdout or b"", media_type="text/plain; charset=utf-8", headers=headers)
