"""Server-side downsampling: min/max/avg of the charted sample columns per time bucket.

One ``GROUP BY`` over the ``(host_id, ts)`` index; a bucket is ``floor(ts / step) * step``.
The result is column-oriented (one array per series) because that is what the charts plot
and it is the smallest JSON for a few thousand points.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import WithJsonSchema
from sqlalchemy import Integer, Select, bindparam, case, func, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import ColumnElement

from collector import db
from collector.db import epoch_bucket
from collector.errors import BadRequest
from collector.models import CHARTED_COLUMNS, ROLLUP_STEP_S, Sample, sample_rollups
from collector.prepared import PerDialect, Prepared
from collector.schemas import AgentTime, OutModel, on_collector_clock

# Decimals each charted column's averages are rounded to (bytes and request counts are whole
# numbers; PSI and utilisation are percentages).
DECIMALS: dict[str, int] = {
    "psi_mem_some_avg10": 2,
    "psi_mem_full_avg10": 2,
    "psi_cpu_some_avg10": 2,
    "psi_io_some_avg10": 2,
    "psi_io_full_avg10": 2,
    "gpu_util": 1,
    "vllm_running": 1,
    "vllm_waiting": 1,
    "vllm_kv_usage": 4,
}
MAX_BUCKETS = 20_000
# Steps the UI picks from, so buckets line up across refetches and with the minute.
NICE_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)


def nice_step(span_s: float, points: int) -> int:
    """The smallest nice step giving at most ``points`` buckets over ``span_s`` seconds."""
    want = span_s / max(points, 1)
    return next((s for s in NICE_STEPS if s >= want), NICE_STEPS[-1])


# One charted column, a number (or null) per bucket. Checked and encoded as plain data: a week's
# chart is ~45,000 of them and per-number checks of a typed list would triple the encode time;
# the schema still says what they are.
Column = Annotated[
    list[Any],
    WithJsonSchema({"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "null"}]}}),
]


class SeriesOut(OutModel):
    """Charted columns per bucket: ``t`` the bucket starts, ``avg``/``min``/``max`` one array per
    column (aligned with ``t``; null where a bucket has no value)."""

    step: int
    t: list[AgentTime]
    avg: dict[str, Column]
    min: dict[str, Column]
    max: dict[str, Column]


def bucketed_samples(
    session: Session, *, host_id: int, since: float, until: float, step: int, offset: float = 0.0
) -> SeriesOut:
    """The charted columns of the samples in [since, until] per ``step`` seconds; columns
    without a single value in the range are left out. [since, until] and ``t`` are on the
    collector's time base (``offset``: the host's clock offset); buckets are the agent's.

    Steps that are whole minutes read the per-minute rollups (a week is 10,080 rows, not
    604,800); shorter steps read the samples.
    """
    if step < 1:
        raise BadRequest("step must be a whole number of seconds >= 1")
    if until < since:
        raise BadRequest("until is before since")
    if (until - since) / step > MAX_BUCKETS:
        raise BadRequest(f"range/step gives more than {MAX_BUCKETS} buckets; use a larger step")
    since, until = since - offset, until - offset
    if step % ROLLUP_STEP_S == 0:
        query = _from_rollups(host_id=host_id, since=since, until=until, step=step)
    else:
        query = _from_samples(host_id=host_id, since=since, until=until, step=step)
    rows = session.execute(query).all()
    out: dict[str, dict[str, Column]] = {"avg": {}, "min": {}, "max": {}}
    for i, name in enumerate(CHARTED_COLUMNS):
        base = 1 + 3 * i
        if all(r[base] is None for r in rows):
            continue
        decimals = DECIMALS.get(name, 0)
        for part, kind in enumerate(("avg", "min", "max")):
            out[kind][name] = [_round(r[base + part], decimals) for r in rows]
    return SeriesOut.model_validate(
        {"step": step, "t": [float(r[0]) for r in rows], **out}, context=on_collector_clock(offset)
    )


def _from_samples(*, host_id: int, since: float, until: float, step: int) -> Select[Any]:
    bucket = epoch_bucket(Sample.ts, step)
    aggs: list[ColumnElement[Any]] = []
    for name in CHARTED_COLUMNS:
        col = getattr(Sample, name)
        aggs += [func.avg(col), func.min(col), func.max(col)]
    return (
        select(bucket, *aggs)
        .where(Sample.host_id == host_id, Sample.ts >= since, Sample.ts <= until)
        .group_by(bucket)
        .order_by(bucket)
    )


def _from_rollups(*, host_id: int, since: float, until: float, step: int) -> Select[Any]:
    r = sample_rollups.c
    bucket = epoch_bucket(r.bucket, step)
    aggs: list[ColumnElement[Any]] = []
    for name in CHARTED_COLUMNS:
        avg = r[f"{name}_avg"]
        # Minutes weigh by their sample count; minutes without the value do not count.
        weight = func.sum(case((avg.is_not(None), r.n)))
        aggs += [
            func.sum(avg * r.n) / weight,
            func.min(r[f"{name}_min"]),
            func.max(r[f"{name}_max"]),
        ]
    first_minute = math.floor(since / ROLLUP_STEP_S) * ROLLUP_STEP_S
    return (
        select(bucket, *aggs)
        .where(r.host_id == host_id, r.bucket >= first_minute, r.bucket <= until)
        .group_by(bucket)
        .order_by(bucket)
    )


def refresh_rollups(session: Session, *, host_id: int, since: float, until: float) -> None:
    """Recompute the rollup rows of every minute touching [since, until] from the samples
    (idempotent: an upsert, so replays and late samples end up counted once)."""
    lo = math.floor(since / ROLLUP_STEP_S) * ROLLUP_STEP_S
    hi = math.floor(until / ROLLUP_STEP_S) * ROLLUP_STEP_S + ROLLUP_STEP_S
    _ROLLUP_UPSERT(session).rowcount(session, host_id=host_id, lo=lo, hi=hi)


def _rollup_upsert(session: Session) -> Prepared:
    insert = db.insert(session, sample_rollups)
    bucket = epoch_bucket(Sample.ts, ROLLUP_STEP_S)
    names = ["host_id", "bucket", "n"]
    host_id = bindparam("host_id", type_=Integer)
    values: list[ColumnElement[Any]] = [host_id, bucket, func.count()]
    for name in CHARTED_COLUMNS:
        col = getattr(Sample, name)
        names += [f"{name}_avg", f"{name}_min", f"{name}_max"]
        values += [func.avg(col), func.min(col), func.max(col)]
    source = (
        select(*values)
        .where(
            Sample.host_id == host_id,
            Sample.ts >= bindparam("lo"),
            Sample.ts < bindparam("hi"),
        )
        .group_by(bucket)
    )
    stmt = insert.from_select(names, source)
    return Prepared(
        stmt.on_conflict_do_update(
            index_elements=["host_id", "bucket"],
            set_={name: stmt.excluded[name] for name in names[2:]},
        )
    )


# Run on the driver: ingest runs it for every batch with samples, and building the statement
# (three aggregates per charted column) cost more than running it.
_ROLLUP_UPSERT = PerDialect(_rollup_upsert)


def _round(value: Any, decimals: int) -> float | int | None:
    if value is None:
        return None
    return round(value) if decimals == 0 else round(float(value), decimals)
