"""Read API for hosts and their telemetry (admin token)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from collector.deps import AdminDep, SessionDep
from collector.models import Host
from collector.services import events as event_service
from collector.services import hosts as host_service
from collector.services import telemetry
from collector.services.vllm_status import vllm_status
from collector.timeutil import to_epoch

router = APIRouter(prefix="/api/v1/hosts", tags=["hosts"])


def host_summary(host: Host) -> dict[str, Any]:
    return {
        "name": host.name,
        "status": host.status,
        "status_since": to_epoch(host.status_since),
        "last_seen": to_epoch(host.last_seen_at),
        "boot_id": host.current_boot_id,
        "agent": {
            "version": host.agent_version,
            "pid": host.agent_pid,
            "started_at": host.agent_started_at,
        },
        "simulated": host.simulated,
        "paused": host.paused,
    }


@router.get("")
def list_hosts(session: SessionDep, _: AdminDep) -> list[dict[str, Any]]:
    return [host_summary(h) for h in host_service.list_hosts(session)]


@router.get("/{name}")
def get_host(name: str, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    host = host_service.get_host(session, name=name)
    latest = host_service.latest_sample(session, host=host)
    return {
        **host_summary(host),
        "latest_sample": telemetry.sample_dict(latest) if latest else None,
    }


@router.get("/{name}/samples")
def get_samples(
    name: str,
    session: SessionDep,
    _: AdminDep,
    since: float | None = None,
    until: float | None = None,
    limit: int = 1000,
) -> dict[str, Any]:
    host = host_service.get_host(session, name=name)
    rows = telemetry.list_samples(session, host_id=host.id, since=since, until=until, limit=limit)
    return {"host": name, "samples": [telemetry.sample_dict(s) for s in rows]}


@router.get("/{name}/lines")
def get_lines(
    name: str,
    session: SessionDep,
    _: AdminDep,
    since: float | None = None,
    until: float | None = None,
    source: str | None = None,
    min_priority: int | None = None,
    q: str | None = None,
    cursor: str | None = None,
    limit: int = 500,
    order: Literal["asc", "desc"] = "asc",
) -> dict[str, Any]:
    host = host_service.get_host(session, name=name)
    rows, next_cursor = telemetry.list_lines(
        session,
        host_id=host.id,
        since=since,
        until=until,
        source=source,
        min_priority=min_priority,
        q=q,
        cursor=cursor,
        limit=limit,
        newest_first=order == "desc",
    )
    return {
        "host": name,
        "lines": [telemetry.line_dict(line) for line in rows],
        "next_cursor": next_cursor,
    }


@router.get("/{name}/events")
def get_events(
    name: str,
    session: SessionDep,
    _: AdminDep,
    kind: str | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int = 500,
) -> dict[str, Any]:
    """Kernel events (with line text and vLLM correlation) and host events, newest first.

    ``kind``: comma-separated kinds (``nv_err,xid``, ``vllm_hung``, or ``gpu_fault``).
    """
    host = host_service.get_host(session, name=name)
    kinds = [k.strip() for k in kind.split(",") if k.strip()] if kind else None
    rows = event_service.list_events(
        session, host_id=host.id, kinds=kinds, since=since, until=until, limit=limit
    )
    return {"host": name, "events": rows}


@router.get("/{name}/vllm")
def get_vllm(name: str, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    """Current vLLM phase, health from the latest sample, latest startup plan and history."""
    host = host_service.get_host(session, name=name)
    return vllm_status(session, host=host)
