"""Empty answers for the incident API until its branch registers the real one.

Included last in ``create_app``: FastAPI serves the first matching route, so once the real
``/api/v1/incidents`` router is included (before this one) these are never reached and this
module can be deleted. The shapes the UI expects are documented in
``collector/static/js/freezes.js`` and ``incident.js``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from collector.deps import AdminDep
from collector.errors import NotFound

router = APIRouter(prefix="/api/v1", tags=["pending"], include_in_schema=False)


@router.get("/incidents")
def list_incidents(_: AdminDep) -> dict[str, Any]:
    return {"incidents": []}


@router.get("/incidents/{incident_id}")
def get_incident(incident_id: int, _: AdminDep) -> dict[str, Any]:
    raise NotFound(f"no incident {incident_id}")
