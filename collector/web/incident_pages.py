"""The freezes timeline and one incident's page, over the same services as the JSON API."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from collector.deps import AdminDep, SessionDep
from collector.services import incident_views
from collector.web.pages import templates

router = APIRouter(include_in_schema=False)


def timeline_bars(incidents: list[dict[str, Any]], now: float) -> dict[str, Any]:
    """Bars as percentages of one shared time axis (oldest incident start → now)."""
    if not incidents:
        return {"bars": [], "start": now, "end": now}
    start = min(i["last_heartbeat_at"] or i["late_at"] for i in incidents)
    span = max(now - start, 1.0)
    bars = []
    for i in incidents:
        left = (i["last_heartbeat_at"] or i["late_at"]) - start
        right = (i["returned_at"] or i["resolved_at"] or now) - start
        bars.append(
            {
                "incident": i,
                "left": 100 * left / span,
                "width": max(0.4, 100 * (right - left) / span),
            }
        )
    return {"bars": bars, "start": start, "end": now}


@router.get("/freezes", response_class=HTMLResponse)
def freezes_page(request: Request, session: SessionDep, _: AdminDep) -> Response:
    incidents = incident_views.list_incidents(session, limit=500)
    return templates.TemplateResponse(
        request,
        "freezes.html",
        {"incidents": incidents, "timeline": timeline_bars(incidents, time.time())},
    )


@router.get("/incidents/{incident_id}", response_class=HTMLResponse)
def incident_page(incident_id: int, request: Request, session: SessionDep, _: AdminDep) -> Response:
    detail = incident_views.incident_detail(session, incident_id=incident_id)
    return templates.TemplateResponse(request, "incident.html", {"i": detail})
