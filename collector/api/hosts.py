"""Read API for hosts and their telemetry (admin token)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from collector.deps import AdminDep, SessionDep, SettingsDep
from collector.models import Host
from collector.services import host_config, telemetry
from collector.services import hosts as host_service
from collector.timeutil import to_epoch, utcnow

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
        "config": host_config.host_config_dict(host),
    }


class HostPatch(BaseModel):
    """Probe and maintenance settings; an empty string clears a text field."""

    ssh: str | None = Field(None, description="user@addr[:port]")
    ssh_key_path: str | None = None
    ssh_host_key: str | None = Field(
        None, description="stored host key line, e.g. ssh-ed25519 AAAA"
    )
    trust_host_key: bool = Field(False, description="fetch and store the current host key (TOFU)")
    vllm_url: str | None = None
    grace_s: float | None = Field(None, ge=0, description="0 = the collector default")
    restart_agent: bool | None = None
    paused: bool | None = None


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


@router.patch("/{name}")
def patch_host(
    name: str, body: HostPatch, session: SessionDep, settings: SettingsDep, _: AdminDep
) -> dict[str, Any]:
    host = host_service.get_host(session, name=name)
    facts = host_config.configure_host(
        session,
        host=host,
        settings=settings,
        now=utcnow(),
        ssh=body.ssh,
        key_path=body.ssh_key_path,
        host_key=body.ssh_host_key,
        trust_host_key=body.trust_host_key,
        vllm_url=body.vllm_url,
        grace_s=body.grace_s,
        restart_agent=body.restart_agent,
        paused=body.paused,
    )
    return {**host_summary(host), **facts}


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
