"""Unauthenticated liveness (/healthz) and Prometheus metrics (/metrics)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from collector import db
from collector.deps import NetconsoleDep, SessionDep
from collector.hosts.registry import count_by_status
from collector.models import HostStatus

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(session: SessionDep) -> dict[str, str]:
    db.ping(session)
    return {"status": "ok"}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(session: SessionDep, netconsole: NetconsoleDep) -> str:
    counts = count_by_status(session)
    out = [
        "# HELP freezewatch_hosts Registered hosts by liveness status.",
        "# TYPE freezewatch_hosts gauge",
    ]
    for status in (HostStatus.UNKNOWN, HostStatus.UP, HostStatus.LATE, HostStatus.LOST):
        out.append(f'freezewatch_hosts{{status="{status.value}"}} {counts.get(status, 0)}')
    if netconsole is not None:
        stats = netconsole.stats()
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
