"""Reading samples and lines back: time ranges, filters, keyset pagination, the latest ones."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from collector.errors import BadRequest
from collector.models import KERNEL_SOURCES, Host, Line, Sample
from collector.readback.timebase import to_agent

MAX_LIMIT = 10_000
LAST_KERNEL_LINES = 20
# A sample stamped further than this after its host was last heard (a clock in 2100, or a
# test value) is stored and listed, never the host's latest: the host's clock offset shows the
# skew. One stamped in 1970 is older than every real sample, so never the latest either.
LATEST_AHEAD_S = 86400.0


def sample_dict(sample: Sample, offset: float = 0.0) -> dict[str, Any]:
    """``ts`` on the collector's time base (``offset``: ``timebase.offset_s``), ``agent_ts``
    as the agent's clock read it."""
    return {
        "seq": sample.seq,
        "ts": sample.ts + offset,
        "agent_ts": sample.ts,
        "received_at": sample.received_at,
        "burst": sample.burst,
        "mem_total": sample.mem_total,
        "mem_available": sample.mem_available,
        "mem_free": sample.mem_free,
        "swap_used": sample.swap_used,
        "psi_mem_some_avg10": sample.psi_mem_some_avg10,
        "psi_mem_full_avg10": sample.psi_mem_full_avg10,
        "psi_cpu_some_avg10": sample.psi_cpu_some_avg10,
        "psi_io_some_avg10": sample.psi_io_some_avg10,
        "psi_io_full_avg10": sample.psi_io_full_avg10,
        "load1": sample.load1,
        "gpu_util": sample.gpu_util,
        "gpu_mem_used": sample.gpu_mem_used,
        "gpu_power_w": sample.gpu_power_w,
        "vllm_running": sample.vllm_running,
        "vllm_waiting": sample.vllm_waiting,
        "vllm_kv_usage": sample.vllm_kv_usage,
        "data": sample.data,
    }


def line_dict(line: Line, offset: float = 0.0) -> dict[str, Any]:
    """``ts`` on the collector's time base, ``agent_ts`` as the agent's clock read it."""
    return {
        "id": line.id,
        "seq": line.seq,
        "kseq": line.kseq,
        "ts": line.ts + offset,
        "agent_ts": line.ts,
        "received_at": line.received_at,
        "source": line.source,
        "priority": line.priority,
        "facility": line.facility,
        "text": line.text,
        "truncated": line.truncated,
        "escaped": line.escaped,
        "fields": line.fields,
    }


def latest_sample(session: Session, *, host_id: int) -> Sample | None:
    """The host's newest sample by the agent's clock, none stamped more than LATEST_AHEAD_S
    after the host's last heartbeat (our clock)."""
    query = select(Sample).where(Sample.host_id == host_id)
    host = session.get(Host, host_id)
    if host is not None and host.last_seen_at is not None:
        seen = host.last_seen_at.timestamp()
        query = query.where(Sample.ts <= seen + LATEST_AHEAD_S)
    return session.scalar(query.order_by(Sample.ts.desc()).limit(1))


def last_kernel_lines(
    session: Session, *, host_id: int, limit: int = LAST_KERNEL_LINES
) -> list[dict[str, Any]]:
    """The host's newest kernel lines (either channel), oldest first."""
    lines = session.scalars(
        select(Line)
        .where(Line.host_id == host_id, Line.source.in_(KERNEL_SOURCES))
        .order_by(Line.ts.desc(), Line.id.desc())
        .limit(limit)
    )
    return [line_dict(x) for x in lines][::-1]


def list_samples(
    session: Session,
    *,
    host_id: int,
    since: float | None = None,
    until: float | None = None,
    limit: int = 1000,
    offset: float = 0.0,
) -> list[Sample]:
    """Samples in [since, until] (the collector's time base: ``offset`` is the host's clock
    offset), oldest first; without ``since``, the newest ``limit``."""
    limit = _check_limit(limit)
    since, until = to_agent(since, offset), to_agent(until, offset)
    query = select(Sample).where(Sample.host_id == host_id)
    if until is not None:
        query = query.where(Sample.ts <= until)
    if since is not None:
        return list(
            session.scalars(query.where(Sample.ts >= since).order_by(Sample.ts).limit(limit))
        )
    newest = list(session.scalars(query.order_by(Sample.ts.desc()).limit(limit)))
    return newest[::-1]


def list_lines(
    session: Session,
    *,
    host_id: int,
    since: float | None = None,
    until: float | None = None,
    source: str | None = None,
    min_priority: int | None = None,
    q: str | None = None,
    cursor: str | None = None,
    limit: int = 500,
    newest_first: bool = False,
    offset: float = 0.0,
) -> tuple[list[Line], str | None]:
    """Lines keyset-paginated on (ts, id), oldest first unless ``newest_first``; returns the
    page and the cursor of the next one. [since, until] is on the collector's time base
    (``offset``: the host's clock offset); the cursor is the agent's.

    ``min_priority`` is a syslog severity: 3 means "err and worse" (numerically <= 3).
    """
    limit = _check_limit(limit)
    since, until = to_agent(since, offset), to_agent(until, offset)
    query = select(Line).where(Line.host_id == host_id)
    if since is not None:
        query = query.where(Line.ts >= since)
    if until is not None:
        query = query.where(Line.ts <= until)
    if source:
        query = query.where(Line.source == source)
    if min_priority is not None:
        query = query.where(Line.priority <= min_priority)
    if q:
        query = query.where(Line.text.contains(q, autoescape=True))
    if cursor:
        ts, line_id = _parse_cursor(cursor)
        key, after = tuple_(Line.ts, Line.id), tuple_(ts, line_id)
        query = query.where(key < after if newest_first else key > after)
    order = (Line.ts.desc(), Line.id.desc()) if newest_first else (Line.ts, Line.id)
    rows = list(session.scalars(query.order_by(*order).limit(limit + 1)))
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, f"{rows[-1].ts!r}:{rows[-1].id}"


def _parse_cursor(cursor: str) -> tuple[float, int]:
    try:
        ts, _, line_id = cursor.rpartition(":")
        return float(ts), int(line_id)
    except ValueError:
        raise BadRequest(f"invalid cursor {cursor!r}") from None


def _check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    return limit
