"""Unauthenticated liveness (/healthz) and Prometheus metrics (/metrics, open unless
FREEZEWATCH_METRICS_TOKEN is set)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from collector import auth, db
from collector.deps import IngestMetricsDep, NetconsoleDep, NowDep, SessionDep, SettingsDep
from collector.errors import AuthFailed
from collector.metrics.exposition import render

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(session: SessionDep) -> dict[str, str]:
    db.ping(session)
    return {"status": "ok"}


@router.get("/metrics", response_class=Response)
def metrics(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    netconsole: NetconsoleDep,
    ingest_metrics: IngestMetricsDep,
    now: NowDep,
) -> Response:
    """Prometheus exposition (OpenMetrics when asked); see the README's metrics table."""
    if not auth.scrape_allowed(settings.metrics_token, request.headers.get("authorization")):
        raise AuthFailed("metrics token required (Authorization: Bearer ...)")
    body, content_type = render(
        session,
        now=now.timestamp(),
        ingest=ingest_metrics,
        netconsole=netconsole.stats() if netconsole is not None else None,
        accept=request.headers.get("accept", ""),
    )
    return Response(body, media_type=content_type)
