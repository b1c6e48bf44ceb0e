"""Everything the host timeline draws, in one response: series, markers, bands and spans.

Shapes (all times epoch seconds; lists sorted by time; the UI ignores unknown keys):

- ``series``: see :func:`collector.services.downsample.bucketed_samples`.
- ``markers``: kernel events ``{"ts", "kind", "text", "priority", "source", "line_id"}``.
  Until kernel lines are classified on ingest, ``kind`` is a provisional name from the text
  (``xid``, ``nv_err``, ``nvrm``, ``kernel_err``); the classifier replaces
  :func:`kernel_markers` and keeps the shape (adding e.g. ``"label"``/``"code"`` is fine).
- ``phases``: vLLM phase bands ``{"start", "end" | null, "phase", "label"}`` (empty for now).
- ``incidents``: ``{"id", "start", "end" | null, "kind", "resolution" | null, "url"}``
  (empty until incidents exist).
- ``matrix``: matrix-run workload windows ``{"run_id", "profile", "workload", "start",
  "end" | null, "status", "url"}`` (empty until matrix runs exist).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from collector.models import Host, Line
from collector.services.downsample import bucketed_samples, nice_step
from collector.timeutil import epoch

DEFAULT_SPAN_S = 3600.0
DEFAULT_POINTS = 1500
MAX_MARKERS = 2000
KERNEL_SOURCES = ("kmsg", "netconsole")


def provisional_kind(text: str, priority: int | None) -> str:
    """A marker kind from the line alone; the kernel-event classifier supersedes it."""
    if "Xid" in text:
        return "xid"
    if "NV_ERR_" in text:
        return "nv_err"
    if "NVRM" in text:
        return "nvrm"
    return "kernel_err"


def kernel_markers(
    session: Session, *, host_id: int, since: float, until: float
) -> list[dict[str, Any]]:
    """Kernel lines worth a marker: severity err or worse, or any NVIDIA driver line."""
    query = (
        select(Line)
        .where(
            Line.host_id == host_id,
            Line.ts >= since,
            Line.ts <= until,
            Line.source.in_(KERNEL_SOURCES),
            or_(Line.priority <= 3, Line.text.contains("NVRM"), Line.text.contains("Xid")),
        )
        .order_by(Line.ts, Line.id)
        .limit(MAX_MARKERS)
    )
    return [
        {
            "ts": line.ts,
            "kind": provisional_kind(line.text, line.priority),
            "text": line.text,
            "priority": line.priority,
            "source": line.source,
            "line_id": line.id,
        }
        for line in session.scalars(query)
    ]


def phase_bands(
    session: Session, *, host_id: int, since: float, until: float
) -> list[dict[str, Any]]:
    return []


def incident_spans(
    session: Session, *, host_id: int, since: float, until: float
) -> list[dict[str, Any]]:
    return []


def matrix_windows(
    session: Session, *, host_id: int, since: float, until: float
) -> list[dict[str, Any]]:
    return []


def host_timeline(
    session: Session,
    *,
    host: Host,
    since: float | None = None,
    until: float | None = None,
    step: int | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The host page's data for [since, until] (default: the last hour) at ``step`` seconds
    (default: a nice step giving ~1500 points)."""
    now = epoch() if now is None else now
    until = now if until is None else until
    since = until - DEFAULT_SPAN_S if since is None else since
    step = nice_step(until - since, DEFAULT_POINTS) if step is None else step
    window = {"host_id": host.id, "since": since, "until": until}
    return {
        "host": host.name,
        "since": since,
        "until": until,
        "step": step,
        "now": now,
        "series": bucketed_samples(session, step=step, **window),
        "markers": kernel_markers(session, **window),
        "phases": phase_bands(session, **window),
        "incidents": incident_spans(session, **window),
        "matrix": matrix_windows(session, **window),
    }
