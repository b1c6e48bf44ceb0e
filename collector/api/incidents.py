"""Incidents API: list, detail, post-mortem artifact download (admin token).

Shapes: :mod:`collector.incidents.read`. An artifact is served as text inline (to view
in the browser) or, with ``?download=1``, as an attachment named after the artifact.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from collector.deps import AdminDep, NowDep, SessionDep, SettingsDep
from collector.incidents import read
from collector.params import ArtifactName, Limit, RowId, Since, Text, Until

router = APIRouter(prefix="/api/v1/incidents", tags=["incidents"])


@router.get("")
def list_incidents(
    session: SessionDep,
    _: AdminDep,
    settings: SettingsDep,
    now: NowDep,
    host: Text = None,
    kind: Text = None,
    since: Since = None,
    until: Until = None,
    limit: Limit = 500,
) -> list[read.IncidentListItem]:
    """Newest first, each with its ``cause``; ``since``/``until`` bound the opening time."""
    return read.list_incidents(
        session,
        host=host,
        kind=kind,
        since=since,
        until=until,
        limit=limit,
        window_s=settings.snapshot_window_s,
        now=now,
    )


@router.get("/{incident_id}")
def get_incident(incident_id: RowId, session: SessionDep, _: AdminDep) -> read.IncidentDetail:
    return read.incident_detail(session, incident_id=incident_id)


@router.get("/{incident_id}/artifacts/{name:path}", response_class=PlainTextResponse)
def get_artifact(
    incident_id: RowId, name: ArtifactName, session: SessionDep, _: AdminDep, download: bool = False
) -> Response:
    artifact = read.get_artifact(session, incident_id=incident_id, name=name)
    filename = f"incident-{incident_id}-{name.replace('/', '-')}.txt"
    disposition = "attachment" if download else "inline"
    ascii_name = re.sub(r"[^A-Za-z0-9._-]", "_", filename)
    headers = {
        "X-Exit-Status": "" if artifact.exit_status is None else str(artifact.exit_status),
        "X-Truncated": "1" if artifact.truncated else "0",
        # RFC 6266: a plain ASCII fallback and the exact name in UTF-8.
        "Content-Disposition": f'{disposition}; filename="{ascii_name}"; '
        f"filename*=UTF-8''{quote(filename)}",
    }
    return Response(artifact.stdout or b"", media_type="text/plain; charset=utf-8", headers=headers)
