"""Reading samples and lines back: time ranges, filters, keyset pagination, the latest ones,
quiet pages (without the noise a reader skips) and their one shape (``SampleOut``,
``LineOut``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Annotated, Any, TypeVar

from pydantic import AliasChoices, BeforeValidator, Field, TypeAdapter, ValidationError
from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import instance_dict

from collector.errors import BadRequest
from collector.models import KERNEL_SOURCES, Base, Host, Line, Sample
from collector.readback.noise import noise
from collector.readback.timebase import to_agent
from collector.schemas import AgentTime, OutModel, ReportedScalar, first_entry, on_collector_clock

MAX_LIMIT = 10_000
LAST_KERNEL_LINES = 20
# A sample stamped further than this after its host was last heard (a clock in 2100, or a
# test value) is stored and listed, never the host's latest: the host's clock offset shows the
# skew. One stamped in 1970 is older than every real sample, so never the latest either.
LATEST_AHEAD_S = 86400.0


QUIETED_COUNT_CAP = 10_000


class SampleOut(OutModel):
    """One stored sample: its typed columns, and the agent's whole sample as ``data``; ``ts``
    on the host views' time base (``collector.readback.timebase``), ``agent_ts`` as the agent's
    clock read it."""

    seq: int
    ts: AgentTime
    agent_ts: float = Field(validation_alias=AliasChoices("ts"))
    received_at: float
    burst: bool
    mem_total: int | None
    mem_available: int | None
    mem_free: int | None
    swap_used: int | None
    psi_mem_some_avg10: float | None
    psi_mem_full_avg10: float | None
    psi_cpu_some_avg10: float | None
    psi_io_some_avg10: float | None
    psi_io_full_avg10: float | None
    load1: float | None
    gpu_util: float | None
    gpu_mem_used: int | None
    gpu_power_w: float | None
    vllm_running: float | None
    vllm_waiting: float | None
    vllm_kv_usage: float | None
    data: dict[str, Any] | None


class LineOut(OutModel):
    """One stored log line; ``truncated`` when it was cut at the wire's line limit; ``ts`` and
    ``agent_ts`` as in ``SampleOut``."""

    id: int
    seq: int | None
    kseq: int | None
    ts: AgentTime
    agent_ts: float = Field(validation_alias=AliasChoices("ts"))
    received_at: float
    source: str
    priority: int | None
    facility: int | None
    text: str
    truncated: bool
    # Its text held NUL characters, stored escaped (see the README: "What ingest accepts").
    escaped: bool
    fields: dict[str, Any] | None


def _first_vllm_health(data: dict[str, Any] | None) -> Any:
    return first_entry((data or {}).get("vllm")).get("health")


class LatestBrief(OutModel):
    """The few latest figures the hosts overview shows (vLLM health from the first endpoint)."""

    ts: float
    mem_total: int | None
    mem_available: int | None
    swap_used: int | None
    psi_mem_full_avg10: float | None
    gpu_util: float | None
    # Read from the sample's whole ``data``: the first vLLM endpoint's /health.
    vllm_health: Annotated[ReportedScalar, BeforeValidator(_first_vllm_health)] = Field(
        validation_alias="data"
    )
    vllm_running: float | None
    vllm_waiting: float | None


class RecentEvidence(OutModel):
    """What an alert carries of a host's present: its newest sample and kernel lines."""

    last_sample: SampleOut | None
    kernel_lines: list[LineOut]


T = TypeVar("T")
SAMPLES = TypeAdapter(list[SampleOut])
LINES = TypeAdapter(list[LineOut])


def rows_out(adapter: TypeAdapter[list[T]], rows: Iterable[Base], offset: float = 0.0) -> list[T]:
    """The rows validated from their loaded column values (the ORM's instance dict): half the
    cost of reading each attribute through its descriptor, as ``from_attributes`` does, on
    pages of thousands. A row with an attribute not loaded (expired) is read that way.
    ``offset``: the host's clock offset, for the host views (``timebase.offset_s``)."""
    rows = list(rows)
    clock = on_collector_clock(offset)
    try:
        return adapter.validate_python([instance_dict(row) for row in rows], context=clock)
    except ValidationError:
        return adapter.validate_python(rows, from_attributes=True, context=clock)


def samples_out(rows: Iterable[Sample], offset: float = 0.0) -> list[SampleOut]:
    return rows_out(SAMPLES, rows, offset)


def lines_out(rows: Iterable[Line], offset: float = 0.0) -> list[LineOut]:
    return rows_out(LINES, rows, offset)


def samples_json(rows: Iterable[Sample]) -> list[dict[str, Any]]:
    """``SampleOut`` of each row as plain JSON data, to store or send (snapshots, alerts)."""
    out: list[dict[str, Any]] = SAMPLES.dump_python(samples_out(rows), mode="json")
    return out


def lines_json(rows: Iterable[Line]) -> list[dict[str, Any]]:
    """``LineOut`` of each row as plain JSON data, to store or send (snapshots, alerts)."""
    out: list[dict[str, Any]] = LINES.dump_python(lines_out(rows), mode="json")
    return out


def latest_sample(session: Session, *, host_id: int) -> Sample | None:
    """The host's newest sample by the agent's clock, none stamped more than LATEST_AHEAD_S
    after the host's last heartbeat (our clock)."""
    query = select(Sample).where(Sample.host_id == host_id)
    host = session.get(Host, host_id)
    if host is not None and host.last_seen_at is not None:
        seen = host.last_seen_at.timestamp()
        query = query.where(Sample.ts <= seen + LATEST_AHEAD_S)
    return session.scalar(query.order_by(Sample.ts.desc()).limit(1))


def first_sample_ts(session: Session, *, host_id: int) -> float | None:
    """When the host's oldest sample was taken (agent clock), or None."""
    return session.scalar(select(func.min(Sample.ts)).where(Sample.host_id == host_id))


def last_kernel_lines(
    session: Session, *, host_id: int, limit: int = LAST_KERNEL_LINES
) -> list[Line]:
    """The host's newest kernel lines (either channel), oldest first."""
    lines = session.scalars(
        select(Line)
        .where(Line.host_id == host_id, Line.source.in_(KERNEL_SOURCES))
        .order_by(Line.ts.desc(), Line.id.desc())
        .limit(limit)
    )
    return list(lines)[::-1]


def latest_brief(session: Session, *, host_id: int) -> LatestBrief | None:
    sample = latest_sample(session, host_id=host_id)
    return None if sample is None else LatestBrief.model_validate(sample)


def recent_evidence(session: Session, *, host_id: int) -> RecentEvidence:
    return RecentEvidence.model_validate(
        {
            "last_sample": latest_sample(session, host_id=host_id),
            "kernel_lines": last_kernel_lines(session, host_id=host_id),
        }
    )


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
    limit = check_limit(limit)
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
    quiet: bool = False,
) -> tuple[list[Line], str | None]:
    """Lines keyset-paginated on (ts, id), oldest first unless ``newest_first``; returns the
    page and the cursor of the next one. [since, until] is on the collector's time base
    (``offset``: the host's clock offset); the cursor is the agent's.

    ``min_priority`` is a syslog severity: 3 means "err and worse" (numerically <= 3);
    ``quiet`` leaves out :func:`noise`.
    """
    limit = check_limit(limit)
    since, until = to_agent(since, offset), to_agent(until, offset)
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
        ts, line_id = parse_cursor(cursor)
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
    offset: float = 0.0,
) -> int:
    """How many :func:`noise` lines a quiet page of :func:`list_lines` left out between its
    neighbours (the whole range once the page is the last), at most ``QUIETED_COUNT_CAP``;
    [since, until] as in :func:`list_lines`."""
    lo, hi = to_agent(since, offset), to_agent(until, offset)
    at = parse_cursor(cursor)[0] if cursor else None
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


def parse_cursor(cursor: str) -> tuple[float, int]:
    """``(ts, id)`` of a lines page's ``next_cursor``; BadRequest if it cannot be one."""
    try:
        ts, _, line_id = cursor.rpartition(":")
        at, row = float(ts), int(line_id)
    except ValueError:
        raise BadRequest(f"invalid cursor {cursor!r}") from None
    if not math.isfinite(at) or not 0 <= row < 2**63:
        raise BadRequest(f"invalid cursor {cursor!r}")
    return at, row


def check_limit(limit: int) -> int:
    """``limit`` of a read API page, refused with a 400 outside 1..MAX_LIMIT."""
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    return limit
