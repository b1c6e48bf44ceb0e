"""Read API for hosts and their telemetry, and host settings (admin token)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

import agent
from collector import db
from collector.deps import AdminDep, NetconsoleDep, NowDep, SessionDep, SettingsDep, SSHDep
from collector.guard.report import guard_dict
from collector.hosts import registry
from collector.hosts.config import HostPatch, configure_host, host_config_dict
from collector.incidents.read import open_incident_brief
from collector.kernel.read import list_events, list_occurrences
from collector.liveness.status import set_paused
from collector.models import Host, Sample
from collector.netconsole.health import canary_report, netconsole_report
from collector.readback import series, timeline
from collector.readback.board import host_board
from collector.readback.downsample import bucketed_samples
from collector.readback.guard_events import guard_firings
from collector.schemas import first_entry
from collector.timeutil import to_epoch
from collector.vllm.status import latest_vllm_phase, vllm_status

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
            # This collector's bundle differs: `freezewatch-collector deploy-agent NAME` upgrades.
            "outdated": registry.agent_outdated(host),
            "bundled_version": agent.__version__,
        },
        "simulated": host.simulated,
        "paused": host.paused,
        "netconsole_from": list(host.netconsole_from or []),
        "config": host_config_dict(host),
        "guard": guard_dict(host),
    }


def latest_brief(sample: Sample | None) -> dict[str, Any] | None:
    """The few latest figures the hosts overview shows (vLLM health from the first endpoint)."""
    if sample is None:
        return None
    return {
        "ts": sample.ts,
        "mem_total": sample.mem_total,
        "mem_available": sample.mem_available,
        "swap_used": sample.swap_used,
        "psi_mem_full_avg10": sample.psi_mem_full_avg10,
        "gpu_util": sample.gpu_util,
        "vllm_health": first_entry((sample.data or {}).get("vllm")).get("health"),
        "vllm_running": sample.vllm_running,
        "vllm_waiting": sample.vllm_waiting,
    }


@router.get("")
def list_hosts(session: SessionDep, _: AdminDep, now: NowDep) -> list[dict[str, Any]]:
    """Every host with its latest figures, its latest vLLM start's phase, its open (or
    resolving) incident ``{"id", "kind", "state", "since", "url"}`` or null, and its status
    board (availability, incidents, freezes, sparkline: ``collector.readback.board``)."""
    return [
        {
            **host_summary(h),
            "latest": latest_brief(series.latest_sample(session, host_id=h.id)),
            "vllm_phase": latest_vllm_phase(session, host_id=h.id),
            "open_incident": open_incident_brief(session, host_id=h.id),
            "board": host_board(session, host_id=h.id, now=now.timestamp()),
        }
        for h in registry.list_hosts(session)
    ]


@router.get("/{name}")
def get_host(name: str, session: SessionDep, _: AdminDep, now: NowDep) -> dict[str, Any]:
    host = registry.get_host(session, name=name)
    latest = series.latest_sample(session, host_id=host.id)
    expect = ("kmsg", "netconsole") if host.netconsole_from else ("kmsg",)
    return {
        **host_summary(host),
        "latest_sample": series.sample_dict(latest) if latest else None,
        "first_sample_ts": series.first_sample_ts(session, host_id=host.id),
        "canary": canary_report(session, host_id=host.id, expect=expect, now=now.timestamp()),
        "netconsole": netconsole_report(session, host_id=host.id),
    }


@router.delete("/{name}", status_code=204)
def delete_host(name: str, session: SessionDep, _: AdminDep) -> None:
    registry.delete_host(session, host=registry.get_host(session, name=name))


@router.patch("/{name}")
def patch_host(
    name: str,
    body: HostPatch,
    session: SessionDep,
    settings: SettingsDep,
    netconsole: NetconsoleDep,
    ssh: SSHDep,
    now: NowDep,
    _: AdminDep,
) -> dict[str, Any]:
    host = registry.get_host(session, name=name)
    facts = configure_host(
        session,
        host=host,
        fetch_key=ssh.fetch_host_key,
        ssh=body.ssh,
        key_path=body.ssh_key_path,
        host_key=body.ssh_host_key,
        trust_host_key=body.trust_host_key,
        vllm_url=body.vllm_url,
        grace_s=body.grace_s,
        restart_agent=body.restart_agent,
    )
    if body.paused is not None:
        set_paused(session, host=host, paused=body.paused, now=now, settings=settings)
    if "netconsole_from" in body.model_fields_set:
        registry.set_netconsole_from(session, host=host, addrs=body.netconsole_from or [])
        if netconsole is not None:
            # The receiver reloads its allowlist from the database: after the commit.
            db.after_commit(session, netconsole.allowlist.invalidate)
    return {**host_summary(host), **facts}


@router.get("/{name}/samples")
def get_samples(
    name: str,
    session: SessionDep,
    _: AdminDep,
    now: NowDep,
    since: float | None = None,
    until: float | None = None,
    limit: int = 1000,
    step: int | None = None,
) -> dict[str, Any]:
    """Raw samples; with ``step`` (seconds) min/max/avg per bucket ``floor(ts/step)*step``
    instead, as ``{"host", "since", "until", "step", "t": [...], "avg"|"min"|"max": {col: [...]}}``
    (``since`` defaults to one hour before ``until``, ``until`` to now)."""
    host = registry.get_host(session, name=name)
    if step is not None:
        until = now.timestamp() if until is None else until
        since = until - timeline.DEFAULT_SPAN_S if since is None else since
        samples = bucketed_samples(session, host_id=host.id, since=since, until=until, step=step)
        return {"host": name, "since": since, "until": until, **samples}
    rows = series.list_samples(session, host_id=host.id, since=since, until=until, limit=limit)
    return {"host": name, "samples": [series.sample_dict(s) for s in rows]}


@router.get("/{name}/timeline")
def get_timeline(
    name: str,
    session: SessionDep,
    _: AdminDep,
    now: NowDep,
    since: float | None = None,
    until: float | None = None,
    step: int | None = None,
) -> dict[str, Any]:
    """One request for the host page: bucketed series, kernel markers, vLLM phase bands,
    incident spans and matrix-run windows (shapes in ``collector.readback.timeline``)."""
    host = registry.get_host(session, name=name)
    return timeline.host_timeline(
        session, host=host, since=since, until=until, step=step, now=now.timestamp()
    )


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
    quiet: bool = False,
) -> dict[str, Any]:
    """``quiet`` leaves out vLLM access-log and canary lines and says how many (``quieted``,
    counted between the page's neighbours, at most 10,000)."""
    host = registry.get_host(session, name=name)
    span: dict[str, Any] = {"host_id": host.id, "since": since, "until": until}
    newest_first = order == "desc"
    rows, next_cursor = series.list_lines(
        session,
        **span,
        source=source,
        min_priority=min_priority,
        q=q,
        cursor=cursor,
        limit=limit,
        newest_first=newest_first,
        quiet=quiet,
    )
    page: dict[str, Any] = {
        "host": name,
        "lines": [series.line_dict(line) for line in rows],
        "next_cursor": next_cursor,
    }
    if quiet:
        more = next_cursor is not None
        page["quieted"] = series.count_quieted(
            session, **span, page=rows, cursor=cursor, more=more, newest_first=newest_first
        )
    return page


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
    host = registry.get_host(session, name=name)
    kinds = [k.strip() for k in kind.split(",") if k.strip()] if kind else None
    rows = list_events(session, host_id=host.id, kinds=kinds, since=since, until=until, limit=limit)
    return {"host": name, "events": rows}


@router.get("/{name}/guard")
def get_guard(
    name: str,
    session: SessionDep,
    _: AdminDep,
    now: NowDep,
    since: float | None = None,
    until: float | None = None,
) -> dict[str, Any]:
    """The guard's state and rules as the agent reported them, and its firings (dry-run
    matches included) in [since, until] (default: the last 7 days), newest last."""
    host = registry.get_host(session, name=name)
    until = now.timestamp() if until is None else until
    since = until - 7 * 86400 if since is None else since
    firings = guard_firings(session, host_id=host.id, since=since, until=until)
    return {"host": name, **guard_dict(host), "firings": firings}


@router.get("/{name}/occurrences")
def get_occurrences(
    name: str, session: SessionDep, _: AdminDep, since: float | None = None, limit: int = 500
) -> dict[str, Any]:
    """Kernel faults folded by (kind, code, device): count, first/last seen, severity, action
    (``inspect_hardware`` once a fatal one came back after reboots), most recent first."""
    host = registry.get_host(session, name=name)
    rows = list_occurrences(session, host_id=host.id, since=since, limit=limit)
    return {"host": name, "occurrences": rows}


@router.get("/{name}/vllm")
def get_vllm(name: str, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    """Current vLLM phase, health from the latest sample, latest startup plan and history."""
    host = registry.get_host(session, name=name)
    return vllm_status(session, host=host)
