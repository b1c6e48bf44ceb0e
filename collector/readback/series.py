"""Reading samples and lines back: time ranges, filters, keyset pagination, the latest ones."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, or_, select, tuple_
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import ColumnElement

from agent.canary import CANARY_PREFIX
from collector.errors import BadRequest
from collector.models import KERNEL_SOURCES, Line, Sample

MAX_LIMIT = 10_000
LAST_KERNEL_LINES = 20
QUIETED_COUNT_CAP = 10_000


# vLLM endpoints that are polled (the agent, load balancers): noise whatever they answer.
POLLED = ("/health", "/metrics", "/v1/models", "/ping")


def noise() -> ColumnElement[bool]:
    """Lines a reader skips: vLLM's access log (uvicorn's ``... - "GET /health HTTP/1.1" 200
    OK``, from its log or a unit's journal) for polled endpoints and for any answer below 5xx,
    and the agent's canary lines. The pages' logs.js tells them apart with the same patterns."""
    answers = [Line.text.like(f'%"% HTTP/%" {digit}__%') for digit in "1234"]
    polled = [Line.text.like(f'%"GET {path} HTTP/%" ___%') for path in POLLED]
    access = or_(*answers, *polled)
    return or_(
        and_(Line.source.not_in(KERNEL_SOURCES), access),
        Line.text.like(f"%{CANARY_PREFIX} %"),
    )


def sample_dict(sample: Sample) -> dict[str, Any]:
    return {
        "seq": sample.seq,
        "ts": sample.ts,
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


def line_dict(line: Line) -> dict[str, Any]:
    return {
        "id": line.id,
        "seq": line.seq,
        "kseq": line.kseq,
        "ts": line.ts,
        "received_at": line.received_at,
        "source": line.source,
        "priority": line.priority,
        "facility": line.facility,
        "text": line.text,
        "truncated": line.truncated,
        "fields": line.fields,
    }


def latest_sample(session: Session, *, host_id: int) -> Sample | None:
    """The host's newest sample by the agent's clock."""
    return session.scalar(
        select(Sample).where(Sample.host_id == host_id).order_by(Sample.ts.desc()).limit(1)
    )


def first_sample_ts(session: Session, *, host_id: int) -> float | None:
    """When the host's oldest sample was taken (agent clock), or None."""
    return session.scalar(select(func.min(Sample.ts)).where(Sample.host_id == host_id))


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
) -> list[Sample]:
    """Samples in [since, until], oldest first; without ``since``, the newest ``limit``."""
    limit = _check_limit(limit)
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
    quiet: bool = False,
) -> tuple[list[Line], str | None]:
    """Lines keyset-paginated on (ts, id), oldest first unless ``newest_first``; returns the
    page and the cursor of the next one.

    ``min_priority`` is a syslog severity: 3 means "err and worse" (numerically <= 3);
    ``quiet`` leaves out :func:`noise`.
    """
    limit = _check_limit(limit)
    query = select(Line).where(Line.host_id == host_id)
    if quiet:
        query = query.where(~noise())
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


def count_quieted(
    session: Session,
    *,
    host_id: int,
    since: float | None,
    until: float | None,
    page: list[Line],
    cursor: str | None,
    more: bool,
    newest_first: bool,
) -> int:
    """How many :func:`noise` lines a quiet page of :func:`list_lines` left out between its
    neighbours (the whole range once the page is the last), at most ``QUIETED_COUNT_CAP``."""
    lo, hi = since, until
    at = _parse_cursor(cursor)[0] if cursor else None
    edge = page[-1].ts if more and page else None
    if newest_first:
        lo, hi = edge if edge is not None else lo, at if at is not None else hi
    else:
        lo, hi = at if at is not None else lo, edge if edge is not None else hi
    query = select(Line.id).where(Line.host_id == host_id, noise())
    if lo is not None:
        query = query.where(Line.ts >= lo)
    if hi is not None:
        query = query.where(Line.ts <= hi)
    capped = query.limit(QUIETED_COUNT_CAP).subquery()
    return session.scalar(select(func.count()).select_from(capped)) or 0


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
