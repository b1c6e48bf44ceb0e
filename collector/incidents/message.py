"""An incident as people read it in chat or mail: host, verdict, downtime, the first kernel event
with its action, the link."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.alerts.notice import Notice, lines
from collector.kernel.read import KernelEventOut, describe_event
from collector.models import Host, Incident, KernelEventRow, Line
from collector.timeutil import to_epoch

# What each kind (on opening) and resolution (on return) means, in a few words.
VERDICTS = {
    "unreachable": "no heartbeat, no probe answers: suspected host freeze, or the network is cut",
    "agent_down": "no heartbeat but the host answers SSH: the agent is not sending",
    "rebooted": "came back with a new boot: a hard freeze or crash that needed a restart",
    "planned_reboot": "came back from an announced reboot",
    "agent_recovered": "the agent is sending again; the host never went away",
    "network_partition": "the host kept running; its replayed samples cover the gap",
    "stall": "the whole host stalled (its own samples stop in the gap) and came back",
    "returned": "heartbeats are back",
    "unpaused": "maintenance pause ended",
}


def first_kernel_event(
    session: Session, *, incident: Incident, window_s: float, now: datetime
) -> dict[str, Any] | None:
    """The host's first classified kernel event from ``window_s`` before the silence to its end
    (agent clock), with its line; None when the kernel said nothing worth naming."""
    start = to_epoch(incident.silence_start) or now.timestamp()
    end = to_epoch(incident.silence_end) or now.timestamp()
    row = session.execute(
        select(KernelEventRow, Line)
        .join(Line, Line.id == KernelEventRow.line_id)
        .where(
            KernelEventRow.host_id == incident.host_id,
            KernelEventRow.ts >= start - window_s,
            KernelEventRow.ts <= end,
        )
        .order_by(KernelEventRow.ts, KernelEventRow.id)
        .limit(1)
    ).first()
    return None if row is None else KernelEventOut.of(row[0], row[1]).model_dump(mode="json")


def duration_text(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def _clock(dt: datetime | None) -> str:
    return dt.strftime("%Y-%m-%d %H:%M:%S UTC") if dt else "–"


def incident_notice(
    *,
    event: str,
    incident: Incident,
    host: Host,
    summary: dict[str, Any],
    kernel_event: dict[str, Any] | None,
    alive_text: str,
    link: str,
) -> Notice:
    opened = event == "incident.opened"
    verdict = incident.kind if opened else incident.resolution or "returned"
    probes = ", ".join(
        f"{p.get('name')} {'ok' if p.get('ok') else 'failed'}" for p in incident.probes or []
    )
    if opened:
        title = f"freezewatch: {host.name} is silent ({verdict})"
        timing = f"Last heartbeat: {_clock(incident.silence_start)}"
    else:
        title = f"freezewatch: {host.name} is back ({verdict})"
        downtime = duration_text(summary.get("downtime_s"))
        timing = f"Downtime: {downtime} (silent since {_clock(incident.silence_start)})"
    stall = duration_text(incident.stall_s) if incident.stall_s else None
    return Notice(
        title=title,
        body=lines(
            f"{host.name}: {VERDICTS.get(verdict, verdict)}",
            timing,
            f"Stalled for {stall}" if stall else None,
            f"Probes: {probes}" if opened and probes else None,
            "First kernel event: "
            + (describe_event(kernel_event) if kernel_event else "none classified"),
            alive_text or None,
            "The collector was down when the silence began." if incident.collector_down else None,
            link,
        ),
        level="failure" if opened else "success",
    )
