"""Read API for hosts (the overview, one host with its health) and host settings (admin token);
what a host recorded is ``host_records``."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from collector import db
from collector.deps import (
    AdminDep,
    NetconsoleDep,
    NowDep,
    SessionDep,
    SettingsDep,
    SSHDep,
    VllmStatesDep,
)
from collector.errors import BadRequest
from collector.guard.report import GuardOut
from collector.hosts import registry
from collector.hosts.config import HostPatch, configure_host, set_retention
from collector.hosts.labels import set_labels
from collector.hosts.listing import MAX_PAGE, HostFilter, find_hosts
from collector.hosts.registry import HostOut
from collector.incidents.read import OpenIncidentBrief, open_incident_brief
from collector.liveness.status import set_paused
from collector.models import Host, HostStatus
from collector.netconsole.health import (
    CanaryOut,
    NetconsoleHostOut,
    canary_report,
    netconsole_report,
)
from collector.params import HostName, Text
from collector.readback import series, timebase
from collector.readback.board import HostBoard, host_board
from collector.readback.losses import SpoolLosses, spool_losses
from collector.readback.series import LatestBrief, SampleOut
from collector.retention.usage import StorageOut, host_storage
from collector.schemas import AgentTime, on_collector_clock
from collector.vllm.status import latest_vllm_phase

router = APIRouter(prefix="/api/v1/hosts", tags=["hosts"])


class HostSummary(HostOut):
    """A host with its clock and backlog as the last batch measured them: ``clock_offset_s``
    our clock minus the agent's (from ``timebase.SKEW_MIN_S`` on the views correct for it:
    ``clock_corrected``), ``backlog_bytes`` what its spool still held."""

    clock_offset_s: float | None
    clock_corrected: bool
    backlog_bytes: int | None
    guard: GuardOut


def summary(host: Host) -> dict[str, Any]:
    """The fields of a ``HostSummary``, for the shapes that extend it."""
    return {
        **dict(HostOut.of(host)),
        "clock_offset_s": host.clock_offset_s,
        "clock_corrected": timebase.offset_s(host) != 0.0,
        "backlog_bytes": host.backlog_bytes,
        "guard": GuardOut.of(host),
    }


class HostListItem(HostSummary):
    """A host on the overview: its latest figures, its latest vLLM start's phase, its open
    (or resolving) incident and its status board."""

    latest: LatestBrief | None
    vllm_phase: str | None
    open_incident: OpenIncidentBrief | None
    board: HostBoard


class HostDetail(HostSummary):
    """A host with its latest sample, when its oldest one was taken (the host page fits its
    default range to them), per-channel canary figures, netconsole counters and what its
    agent reported losing."""

    latest_sample: SampleOut | None
    first_sample_ts: AgentTime | None
    canary: dict[str, CanaryOut]
    netconsole: NetconsoleHostOut
    spool_losses: SpoolLosses
    storage: StorageOut


class HostPatched(HostSummary):
    """The host after the change; ``host_key_fingerprint`` when a host key was just trusted."""

    host_key_fingerprint: str | None = None


@router.get("")
def list_hosts(
    session: SessionDep,
    _: AdminDep,
    now: NowDep,
    request: Request,
    response: Response,
    status: Annotated[list[HostStatus] | None, Query(description="any of these")] = None,
    name: Text = None,  # a part of the name, any case
    label: Annotated[
        list[str] | None, Query(description="key=value, or key for any value; all of them")
    ] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE, description="hosts a page")] = None,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
) -> list[HostListItem]:
    """The hosts the filters select, by name; a page of them with ``limit``/``offset``. The
    ``X-Total-Count`` header says how many the filters select, ``Link`` the next page."""
    try:
        where = HostFilter.parse(statuses=status, name=name, labels=label)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    hosts, total = find_hosts(session, where=where, limit=limit, offset=offset)
    response.headers["X-Total-Count"] = str(total)
    if limit is not None and offset + limit < total:
        following = request.url.include_query_params(offset=offset + limit)
        response.headers["Link"] = f'<{following}>; rel="next"'
    return [
        HostListItem.model_validate(
            {
                **summary(h),
                "latest": series.latest_brief(session, host_id=h.id),
                "vllm_phase": latest_vllm_phase(session, host_id=h.id),
                "open_incident": open_incident_brief(session, host_id=h.id),
                "board": host_board(session, host=h, now=now.timestamp()),
            }
        )
        for h in hosts
    ]


@router.get("/{name}")
def get_host(
    name: HostName, session: SessionDep, settings: SettingsDep, _: AdminDep, now: NowDep
) -> HostDetail:
    """The host, its latest sample, its kernel channels' health, its spool losses and its disk
    use (``storage``: rows and estimated bytes per kind, with the days each kind is kept)."""
    host = registry.get_host(session, name=name)
    expect = ("kmsg", "netconsole") if host.netconsole_from else ("kmsg",)
    offset = timebase.offset_s(host)
    return HostDetail.model_validate(
        {
            **summary(host),
            "latest_sample": series.latest_sample(session, host_id=host.id),
            "first_sample_ts": series.first_sample_ts(session, host_id=host.id),
            "canary": canary_report(session, host_id=host.id, expect=expect, now=now.timestamp()),
            "netconsole": netconsole_report(session, host_id=host.id),
            "spool_losses": spool_losses(session, host_id=host.id, offset=offset),
            "storage": host_storage(session, host=host, settings=settings, now=now.timestamp()),
        },
        context=on_collector_clock(offset),
    )


@router.delete("/{name}", status_code=204)
def delete_host(
    name: HostName, session: SessionDep, vllm_states: VllmStatesDep, _: AdminDep
) -> None:
    host = registry.get_host(session, name=name)
    registry.delete_host(session, host=host)
    # Its vLLM parser and hang detectors go with it: a host made again under the name (on
    # SQLite perhaps under the same id) starts from nothing.
    db.after_commit(session, partial(vllm_states.forget, host.id))


@router.patch("/{name}")
def patch_host(
    name: HostName,
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
            db.after_commit(session, netconsole.allowlist_changed)
    if body.retention is not None:
        set_retention(session, host=host, changes=body.retention)
    if body.labels is not None:
        set_labels(session, host=host, changes=body.labels)
    return HostPatched(**summary(host), **facts)
