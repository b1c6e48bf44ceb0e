"""Read API for hosts and their telemetry (admin token)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.deps import AdminDep, SessionDep, SettingsDep
from collector.hosts import config as host_config
from collector.hosts import registry as host_service
from collector.kernel import read as event_service
from collector.models import Host, Incident, Sample
from collector.netconsole import health as channels
from collector.readback import series as telemetry
from collector.readback import timeline
from collector.readback.downsample import bucketed_samples
from collector.schemas import HostPatch
from collector.timeutil import epoch, to_epoch, utcnow
from collector.vllm.status import vllm_status

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
        "netconsole_from": list(host.netconsole_from or []),
        "config": host_config.host_config_dict(host),
    }


def latest_brief(sample: Sample | None) -> dict[str, Any] | None:
    """The few latest figures the hosts overview shows (vLLM health from the first endpoint)."""
    if sample is None:
        return None
    vllm = (sample.data or {}).get("vllm") or [{}]
    first = vllm[0] if isinstance(vllm, list) and vllm and isinstance(vllm[0], dict) else {}
    return {
        "ts": sample.ts,
        "mem_total": sample.mem_total,
        "mem_available": sample.mem_available,
        "swap_used": sample.swap_used,
        "psi_mem_full_avg10": sample.psi_mem_full_avg10,
        "gpu_util": sample.gpu_util,
        "vllm_health": first.get("health"),
        "vllm_running": sample.vllm_running,
        "vllm_waiting": sample.vllm_waiting,
    }


@router.get("")
def list_hosts(session: SessionDep, _: AdminDep) -> list[dict[str, Any]]:
    """Every host with its latest figures, its latest vLLM start's phase and its open (or
    resolving) incident ``{"id", "kind", "state", "since", "url"}`` or null."""
    return [
        {
            **host_summary(h),
            "latest": latest_brief(host_service.latest_sample(session, host=h)),
            "vllm_phase": host_service.latest_vllm_phase(session, host=h),
            "open_incident": open_incident_brief(session, host=h),
        }
        for h in host_service.list_hosts(session)
    ]


def open_incident_brief(session: Session, *, host: Host) -> dict[str, Any] | None:
    """The host's newest incident not yet resolved; ``since`` is its last heartbeat."""
    incident = session.scalar(
        select(Incident)
        .where(Incident.host_id == host.id, Incident.state.in_(("open", "resolving")))
        .order_by(Incident.id.desc())
        .limit(1)
    )
    if incident is None:
        return None
    return {
        "id": incident.id,
        "kind": incident.kind,
        "state": incident.state,
        "since": to_epoch(incident.last_heartbeat_at or incident.late_at),
        "url": f"/incidents/{incident.id}",
    }


@router.get("/{name}")
def get_host(name: str, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    host = host_service.get_host(session, name=name)
    latest = host_service.latest_sample(session, host=host)
    expect = ("kmsg", "netconsole") if host.netconsole_from else ("kmsg",)
    return {
        **host_summary(host),
        "latest_sample": telemetry.sample_dict(latest) if latest else None,
        "canary": channels.canary_report(session, host_id=host.id, expect=expect),
        "netconsole": channels.netconsole_report(session, host_id=host.id),
    }


@router.delete("/{name}", status_code=204)
def delete_host(name: str, session: SessionDep, _: AdminDep) -> None:
    host_service.delete_host(session, host=host_service.get_host(session, name=name))


@router.patch("/{name}")
def patch_host(
    name: str,
    body: HostPatch,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    _: AdminDep,
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
    netconsole_changed = "netconsole_from" in body.model_fields_set
    if netconsole_changed:
        host_service.set_netconsole_from(session, host=host, addrs=body.netconsole_from or [])
    session.commit()  # before the netconsole receiver reloads its allowlist from the database
    netconsole = request.app.state.netconsole
    if netconsole is not None and netconsole_changed:
        netconsole.allowlist.invalidate()
    return {**host_summary(host), **facts}


@router.get("/{name}/samples")
def get_samples(
    name: str,
    session: SessionDep,
    _: AdminDep,
    since: float | None = None,
    until: float | None = None,
    limit: int = 1000,
    step: int | None = None,
) -> dict[str, Any]:
    """Raw samples; with ``step`` (seconds) min/max/avg per bucket ``floor(ts/step)*step``
    instead, as ``{"host", "since", "until", "step", "t": [...], "avg"|"min"|"max": {col: [...]}}``
    (``since`` defaults to one hour before ``until``, ``until`` to now)."""
    host = host_service.get_host(session, name=name)
    if step is not None:
        until = epoch() if until is None else until
        since = until - timeline.DEFAULT_SPAN_S if since is None else since
        series = bucketed_samples(session, host_id=host.id, since=since, until=until, step=step)
        return {"host": name, "since": since, "until": until, **series}
    rows = telemetry.list_samples(session, host_id=host.id, since=since, until=until, limit=limit)
    return {"host": name, "samples": [telemetry.sample_dict(s) for s in rows]}


@router.get("/{name}/timeline")
def get_timeline(
    name: str,
    session: SessionDep,
    _: AdminDep,
    since: float | None = None,
    until: float | None = None,
    step: int | None = None,
) -> dict[str, Any]:
    """One request for the host page: bucketed series, kernel markers, vLLM phase bands,
    incident spans and matrix-run windows (shapes in ``collector.readback.timeline``)."""
    host = host_service.get_host(session, name=name)
    return timeline.host_timeline(session, host=host, since=since, until=until, step=step)


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
