"""Unauthenticated liveness (/healthz) and Prometheus metrics (/metrics, open unless
FREEZEWATCH_METRICS_TOKEN is set)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel

from collector import auth, db
from collector.deps import (
    IngestMetricsDep,
    JobMetricsDep,
    LeaderDep,
    NetconsoleDep,
    NowDep,
    SessionDep,
    SettingsDep,
)
from collector.errors import AuthFailed
from collector.metrics.exposition import render

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    # Whether this process runs the singleton jobs (the heartbeat checker, alert delivery);
    # with replicas on one PostgreSQL exactly one does.
    leader: bool = False


@router.get("/healthz")
def healthz(session: SessionDep, leader: LeaderDep) -> Health:
    """``ok`` once the database answers."""
    db.ping(session)
    return Health(leader=leader)


@router.get("/metrics", response_class=Response)
def metrics(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    netconsole: NetconsoleDep,
    ingest_metrics: IngestMetricsDep,
    job_metrics: JobMetricsDep,
    leader: LeaderDep,
    now: NowDep,
) -> Response:
    """Prometheus exposition (OpenMetrics when asked); see the README's metrics table."""
    if not auth.scrape_allowed(settings.metrics_token, request.headers.get("authorization")):
        raise AuthFailed("metrics token required (Authorization: Bearer ...)")
    job_metrics.leader.set(1 if leader else 0)
    body, content_type = render(
        session,
        now=now.timestamp(),
        ingest=ingest_metrics,
        netconsole=netconsole.stats().model_dump() if netconsole is not None else None,
        accept=request.headers.get("accept", ""),
        jobs=job_metrics,
        multiprocess_dir=request.app.state.metrics_dir,
    )
    return Response(body, media_type=content_type)
