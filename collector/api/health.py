"""Unauthenticated liveness (/healthz) and Prometheus metrics (/metrics)."""

from __future__ import annotations

from fastapi import APIRouter, Request
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
def metrics(request: Request, session: SessionDep) -> str:
    counts = dict(session.execute(select(Host.status, func.count()).group_by(Host.status)).all())
    out = [
        "# HELP freezewatch_hosts Registered hosts by liveness status.",
        "# TYPE freezewatch_hosts gauge",
    ]
    for status in ("unknown", "up", "late", "lost"):
        out.append(f'freezewatch_hosts{{status="{status}"}} {counts.get(status, 0)}')
    channel = request.app.state.netconsole
    if channel is not None:
        stats = channel.stats()
        for name, key, help_ in (
            ("datagrams", "datagrams", "Allowlisted netconsole datagrams received."),
            ("records", "records", "Netconsole records parsed and handed to storage."),
            ("unknown_datagrams", "unknown_datagrams", "Datagrams from unknown senders, dropped."),
            ("persist_errors", "persist_errors", "Batches whose raw copy failed to store."),
            ("store_errors", "store_errors", "Record batches that failed to store."),
        ):
            out += [
                f"# HELP freezewatch_netconsole_{name}_total {help_}",
                f"# TYPE freezewatch_netconsole_{name}_total counter",
                f"freezewatch_netconsole_{name}_total {stats[key]}",
            ]
    return "\n".join(out) + "\n"
