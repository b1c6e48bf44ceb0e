"""Read API for hosts and their telemetry, and host settings (admin token)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from collector import db
from collector.deps import AdminDep, NetconsoleDep, NowDep, SessionDep, SettingsDep, SSHDep
from collector.guard.report import GuardOut
from collector.hosts import registry
from collector.hosts.config import HostPatch, configure_host
from collector.hosts.registry import HostOut
from collector.incidents.read import OpenIncidentBrief, open_incident_brief
from collector.kernel.read import EventOut, list_events
from collector.liveness.status import set_paused
from collector.models import Host
from collector.netconsole.health import (
    CanaryOut,
    NetconsoleHostOut,
    canary_report,
    netconsole_report,
)
from collector.readback import series, timeline
from collector.readback.downsample import SeriesOut, bucketed_samples
from collector.readback.guard_events import GuardFiring, guard_firings
from collector.readback.series import LatestBrief, LineOut, SampleOut
from collector.schemas import OutModel
from collector.vllm.status import VllmStatus, latest_vllm_phase, vllm_status

router = APIRouter(prefix="/api/v1/hosts", tags=["hosts"])


class HostSummary(HostOut):
    guard: GuardOut


def summary(host: Host) -> dict[str, Any]:
    """The fields of a ``HostSummary``, for the shapes that extend it."""
    return {**dict(HostOut.of(host)), "guard": GuardOut.of(host)}


class HostListItem(HostSummary):
    """A host on the overview: its latest figures, its latest vLLM start's phase and its open
    (or resolving) incident."""

    latest: LatestBrief | None
    vllm_phase: str | None
    open_incident: OpenIncidentBrief | None


class HostDetail(HostSummary):
    """A host with its latest sample, per-channel canary figures and netconsole counters."""

    latest_sample: SampleOut | None
    canary: dict[str, CanaryOut]
    netconsole: NetconsoleHostOut


class HostPatched(HostSummary):
    """The host after the change; ``host_key_fingerprint`` when a host key was just trusted."""

    host_key_fingerprint: str | None = None


class SamplesPage(OutModel):
    host: str
    samples: list[SampleOut]


class BucketedSamples(SeriesOut):
    host: str
    since: float
    until: float


class LinesPage(OutModel):
    """A page of lines; ``next_cursor`` fetches the next one (null on the last)."""

    host: str
    lines: list[LineOut]
    next_cursor: str | None


class EventsPage(OutModel):
    host: str
    events: list[EventOut]


class GuardStatus(GuardOut):
    host: str
    firings: list[GuardFiring]


@router.get("")
def list_hosts(session: SessionDep, _: AdminDep) -> list[HostListItem]:
    return [
        HostListItem.model_validate(
            {
                **summary(h),
                "latest": series.latest_brief(session, host_id=h.id),
                "vllm_phase": latest_vllm_phase(session, host_id=h.id),
                "open_incident": open_incident_brief(session, host_id=h.id),
            }
        )
        for h in registry.list_hosts(session)
    ]


@router.get("/{name}")
def get_host(name: str, session: SessionDep, _: AdminDep, now: NowDep) -> HostDetail:
    host = registry.get_host(session, name=name)
    latest = series.latest_sample(session, host_id=host.id)
    expect = ("kmsg", "netconsole") if host.netconsole_from else ("kmsg",)
    return HostDetail.model_validate(
        {
            **summary(host),
            "latest_sample": latest,
            "canary": canary_report(session, host_id=host.id, expect=expect, now=now.timestamp()),
            "netconsole": netconsole_report(session, host_id=host.id),
        }
    )


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
) -> HostPatched:
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
    return HostPatched(**summary(host), **facts)


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
) -> SamplesPage | BucketedSamples:
    """Raw samples; with ``step`` (seconds) min/max/avg per bucket ``floor(ts/step)*step``
    instead (``since`` defaults to one hour before ``until``, ``until`` to now)."""
    host = registry.get_host(session, name=name)
    if step is not None:
        until = now.timestamp() if until is None else until
        since = until - timeline.DEFAULT_SPAN_S if since is None else since
        samples = bucketed_samples(session, host_id=host.id, since=since, until=until, step=step)
        return BucketedSamples(host=name, since=since, until=until, **dict(samples))
    rows = series.list_samples(session, host_id=host.id, since=since, until=until, limit=limit)
    return SamplesPage(host=name, samples=series.samples_out(rows))


@router.get("/{name}/timeline")
def get_timeline(
    name: str,
    session: SessionDep,
    _: AdminDep,
    now: NowDep,
    since: float | None = None,
    until: float | None = None,
    step: int | None = None,
) -> timeline.TimelineOut:
    """One request for the host page: bucketed series, kernel markers, vLLM phase bands,
    incident spans and matrix-run windows."""
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
) -> LinesPage:
    host = registry.get_host(session, name=name)
    rows, next_cursor = series.list_lines(
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
    return LinesPage(host=name, lines=series.lines_out(rows), next_cursor=next_cursor)


@router.get("/{name}/events")
def get_events(
    name: str,
    session: SessionDep,
    _: AdminDep,
    kind: str | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int = 500,
) -> EventsPage:
    """Kernel events (with line text and vLLM correlation) and host events, newest first.

    ``kind``: comma-separated kinds (``nv_err,xid``, ``vllm_hung``, or ``gpu_fault``).
    """
    host = registry.get_host(session, name=name)
    kinds = [k.strip() for k in kind.split(",") if k.strip()] if kind else None
    rows = list_events(session, host_id=host.id, kinds=kinds, since=since, until=until, limit=limit)
    return EventsPage(host=name, events=rows)


@router.get("/{name}/guard")
def get_guard(
    name: str,
    session: SessionDep,
    _: AdminDep,
    now: NowDep,
    since: float | None = None,
    until: float | None = None,
) -> GuardStatus:
    """The guard's state and rules as the agent reported them, and its firings (dry-run
    matches included) in [since, until] (default: the last 7 days), newest last."""
    host = registry.get_host(session, name=name)
    until = now.timestamp() if until is None else until
    since = until - 7 * 86400 if since is None else since
    firings = guard_firings(session, host_id=host.id, since=since, until=until)
    guard = GuardOut.of(host).model_dump(exclude_unset=True)
    return GuardStatus.model_validate({"host": name, **guard, "firings": firings})


@router.get("/{name}/vllm")
def get_vllm(name: str, session: SessionDep, _: AdminDep) -> VllmStatus:
    """Current vLLM phase, health from the latest sample, latest startup plan and history."""
    host = registry.get_host(session, name=name)
    return vllm_status(session, host=host)
