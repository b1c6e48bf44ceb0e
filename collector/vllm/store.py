"""vLLM's shipped log lines → server-start, phase and stats rows, through a per-host parser.

The parser (``VllmLogParser``) is incremental and lives in memory between batches; the rows are
the truth. After a collector restart a host's parser is rebuilt by replaying the stored lines of
its current server start, so a start that began before the restart keeps being followed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from collector.models import HostEvent, Line, VllmPhase, VllmStart, fits
from collector.vllm.log_config import CONFIG_FIELDS
from collector.vllm.log_facts import VllmFact
from collector.vllm.log_parser import VllmLogParser
from collector.vllm.plan import PLAN_FIELDS, StartupPlan

# The StartupPlan fields stored as columns of vllm_starts (the `inspect --json` contract).
PLAN_COLUMNS = tuple(f for f in PLAN_FIELDS if f not in ("outcome", "error", "phases"))
PLAN_EXTRAS = (
    "cuda_graph_capture_gib",
    "cuda_graph_capture_s",
    "init_engine_s",
    "kv_cache_blocks",
    *CONFIG_FIELDS,
)
# Periodic log lines stored as host_events, by parser fact kind.
STAT_EVENT_KINDS = {"stats": "vllm_stats", "spec_decode": "spec_decode"}
HANG_SIGNAL = "vllm_hang_signal"
REPLAY_LIMIT = 50_000

StoredLine = tuple[int, float, str]  # (lines.id, ts, text)


def vllm_lines(
    host_id: int, *, since: float, until: float | None = None
) -> Select[int, float, str]:
    """(id, ts, text) of a host's vLLM lines from ``since`` on, in order: through the partial
    vLLM-lines index, not a walk of every kernel line in the window."""
    query = select(Line.id, Line.ts, Line.text).where(
        Line.host_id == host_id, Line.source == "vllm", Line.ts >= since
    )
    if until is not None:
        query = query.where(Line.ts <= until)
    return query.order_by(Line.ts, Line.id)


@dataclass
class VllmStream:
    """One host's parser and the vllm_starts row its current plan is stored in."""

    parser: VllmLogParser
    start_id: int | None = None


def stream_state(stream: VllmStream) -> dict[str, Any]:
    """The stream as JSON, for the next process to go on from (``restore_stream``)."""
    return {"parser": stream.parser.snapshot(), "start_id": stream.start_id}


def restore_stream(state: dict[str, Any]) -> VllmStream:
    return VllmStream(VllmLogParser.restore(state["parser"]), state.get("start_id"))


def load_stream(session: Session, *, host_id: int, exclude_ids: set[int]) -> VllmStream:
    """Rebuild a host's parser from storage: replay the lines of its latest server start.

    ``exclude_ids``: lines stored by the batch in progress (fed afterwards, not twice).
    """
    start = session.scalars(
        select(VllmStart)
        .where(VllmStart.host_id == host_id)
        .order_by(VllmStart.started_ts.desc(), VllmStart.id.desc())
        .limit(1)
    ).first()
    stream = VllmStream(VllmLogParser())
    if start is None:
        return stream
    rows = session.execute(vllm_lines(host_id, since=start.started_ts).limit(REPLAY_LIMIT))
    for line_id, ts, text in rows:
        if line_id in exclude_ids:
            continue
        if ts == start.started_ts and start.first_line_id and line_id < start.first_line_id:
            continue  # the previous start's last lines share the first line's timestamp
        stream.parser.feed(text, ts)
    stream.start_id = start.id
    return stream


def store_vllm_lines(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    stream: VllmStream,
    lines: list[StoredLine],
) -> list[HostEvent]:
    """Feed newly stored vLLM lines (ts order) through the host's parser; store what they say.

    Returns the host events added (periodic stats, spec-decode metrics, plan anomalies, hang
    signals with the phase the server was in).
    """
    touched: dict[int, tuple[VllmStart, StartupPlan]] = {}
    start = session.get(VllmStart, stream.start_id) if stream.start_id is not None else None
    events: list[HostEvent] = []
    for line_id, ts, text in lines:
        for fact in stream.parser.feed(text, ts, ref=line_id):
            if fact.kind in STAT_EVENT_KINDS:
                data = {**fact.data, "line_id": line_id}
                events.append(
                    HostEvent(host_id=host_id, ts=ts, kind=STAT_EVENT_KINDS[fact.kind], data=data)
                )
                continue
            if fact.kind == "hang_signal":
                events.append(_hang_signal(host_id, fact, ts, stream.start_id))
                continue
            if fact.kind == "server_start":
                start = VllmStart(
                    host_id=host_id,
                    boot_pk=boot_pk,
                    started_ts=ts,
                    first_line_id=line_id,
                    outcome="incomplete",
                    drafter_loaded=False,
                    plan={},
                    anomalies=[],
                )
                session.add(start)
                session.flush()
                stream.start_id = start.id
            plan = stream.parser.current
            if start is None or plan is None:
                continue
            touched[start.id] = (start, plan)
            if fact.kind == "phase":
                session.add(
                    VllmPhase(
                        start_id=start.id,
                        host_id=host_id,
                        phase=fact.data["phase"],
                        ts=ts,
                        line_id=line_id,
                    )
                )
            elif fact.kind == "anomaly":
                data = {"anomaly": fact.data["anomaly"], "start_id": start.id, "line_id": line_id}
                events.append(HostEvent(host_id=host_id, ts=ts, kind="vllm_anomaly", data=data))
    for row, plan in touched.values():
        sync_start(row, plan)
    session.add_all(events)
    return events


def store_held_signals(
    session: Session, *, host_id: int, stream: VllmStream, now: float
) -> list[HostEvent]:
    """The stream ended (a matrix server's output closed): the hang signals its parser still
    held, from before any start, stored at their own lines (``now`` for one without a time)."""
    events = [
        _hang_signal(host_id, fact, now, stream.start_id)
        for fact in stream.parser.finish()
        if fact.kind == "hang_signal"
    ]
    session.add_all(events)
    return events


def _hang_signal(host_id: int, fact: VllmFact, ts: float, start_id: int | None) -> HostEvent:
    """A hang signal's event; one held from before any start is at its own line and time."""
    data = {**fact.data, "start_id": None if fact.held else start_id, "line_id": fact.ref}
    at = ts if fact.ts is None else fact.ts
    return HostEvent(host_id=host_id, ts=at, kind=HANG_SIGNAL, data=data)


def _storable(value: Any) -> Any:
    """A number parsed out of a log line as a column holds it: a 64-bit integer, a finite
    float; one that does not fit is left out (the line keeps it)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return fits(value)
    return value


def sync_start(row: VllmStart, plan: StartupPlan) -> None:
    """Copy the parser's view of one server start onto its row."""
    for name in PLAN_COLUMNS:
        setattr(row, name, _storable(getattr(plan, name)))
    row.vllm_version = plan.vllm_version[:64] if plan.vllm_version else None
    row.phase = plan.phase
    row.outcome = plan.outcome
    row.error = plan.error
    row.anomalies = list(plan.anomalies)
    whole: dict[str, Any] = plan.to_dict()
    whole.pop("phases")
    whole.update({name: getattr(plan, name) for name in PLAN_EXTRAS})
    row.plan = {name: _storable(value) for name, value in whole.items()}
