"""Unauthenticated liveness (/healthz) and Prometheus metrics (/metrics)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse
from sqlalchemy import func, select, text

from collector.deps import SessionDep
from collector.models import Host

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(session: SessionDep) -> dict[str, str]:
    session.execute(text("SELECT 1"))
    return {"status": "ok"}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(session: SessionDep) -> str:
    counts = dict(session.execute(select(Host.status, func.count()).group_by(Host.status)).all())
    out = [
        "# HELP freezewatch_hosts Registered hosts by liveness status.",
        "# TYPE freezewatch_hosts gauge",
    ]
    for status in ("unknown", "up", "late", "lost"):
        out.append(f'freezewatch_hosts{{status="{status}"}} {counts.get(status, 0)}')
    return "\n".join(out) + "\n"
