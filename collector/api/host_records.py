"""Read API for what a host recorded: samples, its timeline, lines, events, kernel
occurrences, guard firings and vLLM status (admin token). Times are on the collector's time
base (``collector.readback.timebase``)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter

from collector.deps import AdminDep, NowDep, SessionDep
from collector.guard.report import GuardOut
from collector.hosts import registry
from collector.kernel.read import EventOut, OccurrenceOut, list_events, list_occurrences
from collector.params import Cursor, HostName, Limit, Priority, Since, Step, Text, Until
from collector.readback import series, timebase, timeline
from collector.readback.downsample import SeriesOut, bucketed_samples
from collector.readback.guard_events import GuardFiring, guard_firings
from collector.readback.series import LineOut, SampleOut
from collector.schemas import OutModel
from collector.vllm.status import VllmStatus, vllm_status

router = APIRouter(prefix="/api/v1/hosts", tags=["hosts"])


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


class QuietLinesPage(LinesPage):
    """A page without the noise a reader skips, and how many such lines it left out between
    its neighbours (``quieted``, at most ``series.QUIETED_COUNT_CAP``)."""

    quieted: int


class EventsPage(OutModel):
    host: str
    events: list[EventOut]


class GuardStatus(GuardOut):
    host: str
    firings: list[GuardFiring]


class OccurrencesPage(OutModel):
    host: str
    occurrences: list[OccurrenceOut]


@router.get("/{name}/samples")
def get_samples(
    name: HostName,
    session: SessionDep,
    _: AdminDep,
    now: NowDep,
    since: Since = None,
    until: Until = None,
    limit: Limit = 1000,
    step: Step = None,
) -> SamplesPage | BucketedSamples:
    """Raw samples; with ``step`` (seconds) min/max/avg per bucket ``floor(ts/step)*step``
    instead (``since`` defaults to one hour before ``until``, ``until`` to now). Times and
    filters are on the collector's time base (``collector.readback.timebase``)."""
    host = registry.get_host(session, name=name)
    offset = timebase.offset_s(host)
    if step is not None:
        until = now.timestamp() if until is None else until
        since = until - timeline.DEFAULT_SPAN_S if since is None else since
        samples = bucketed_samples(
            session, host_id=host.id, since=since, until=until, step=step, offset=offset
        )
        return BucketedSamples(host=name, since=since, until=until, **dict(samples))
    rows = series.list_samples(
        session, host_id=host.id, since=since, until=until, limit=limit, offset=offset
    )
    return SamplesPage(host=name, samples=series.samples_out(rows, offset))


@router.get("/{name}/timeline")
def get_timeline(
    name: HostName,
    session: SessionDep,
    _: AdminDep,
    now: NowDep,
    since: Since = None,
    until: Until = None,
    step: Step = None,
) -> timeline.TimelineOut:
    """One request for the host page: bucketed series, kernel markers, vLLM phase bands,
    incident spans and matrix-run windows."""
    host = registry.get_host(session, name=name)
    return timeline.host_timeline(
        session, host=host, since=since, until=until, step=step, now=now.timestamp()
    )


@router.get("/{name}/lines")
def get_lines(
    name: HostName,
    session: SessionDep,
    _: AdminDep,
    since: Since = None,
    until: Until = None,
    source: Text = None,
    min_priority: Priority = None,
    q: Text = None,
    cursor: Cursor = None,
    limit: Limit = 500,
    order: Literal["asc", "desc"] = "asc",
    quiet: bool = False,
) -> LinesPage | QuietLinesPage:
    """``quiet`` leaves out vLLM access-log and canary lines (``readback.noise``) and says how
    many (``QuietLinesPage``)."""
    host = registry.get_host(session, name=name)
    offset = timebase.offset_s(host)
    newest_first = order == "desc"
    rows, next_cursor = series.list_lines(
        session,
        host_id=host.id,
        since=since,
        until=until,
        offset=offset,
        source=source,
        min_priority=min_priority,
        q=q,
        cursor=cursor,
        limit=limit,
        newest_first=newest_first,
        quiet=quiet,
    )
    page = LinesPage(host=name, lines=series.lines_out(rows, offset), next_cursor=next_cursor)
    if not quiet:
        return page
    quieted = series.count_quieted(
        session,
        host_id=host.id,
        since=since,
        until=until,
        offset=offset,
        page=rows,
        cursor=cursor,
        more=next_cursor is not None,
        newest_first=newest_first,
    )
    return QuietLinesPage(**dict(page), quieted=quieted)


@router.get("/{name}/events")
def get_events(
    name: HostName,
    session: SessionDep,
    _: AdminDep,
    kind: Text = None,
    since: Since = None,
    until: Until = None,
    limit: Limit = 500,
) -> EventsPage:
    """Kernel events (with line text and vLLM correlation) and host events, newest first.

    ``kind``: comma-separated kinds (``nv_err,xid``, ``vllm_hung``, or ``gpu_fault``).
    """
    host = registry.get_host(session, name=name)
    kinds = [k.strip() for k in kind.split(",") if k.strip()] if kind else None
    offset = timebase.offset_s(host)
    rows = list_events(
        session, host_id=host.id, kinds=kinds, limit=limit, since=since, until=until, offset=offset
    )
    return EventsPage(host=name, events=rows)


@router.get("/{name}/guard")
def get_guard(
    name: HostName,
    session: SessionDep,
    _: AdminDep,
    now: NowDep,
    since: Since = None,
    until: Until = None,
) -> GuardStatus:
    """The guard's state and rules as the agent reported them, and its firings (dry-run
    matches included) in [since, until] (default: the last 7 days), newest last."""
    host = registry.get_host(session, name=name)
    until = now.timestamp() if until is None else until
    since = until - 7 * 86400 if since is None else since
    firings = guard_firings(session, host_id=host.id, since=since, until=until)
    guard = GuardOut.of(host).model_dump(exclude_unset=True)
    return GuardStatus.model_validate({"host": name, **guard, "firings": firings})


@router.get("/{name}/occurrences")
def get_occurrences(
    name: HostName, session: SessionDep, _: AdminDep, since: Since = None, limit: Limit = 500
) -> OccurrencesPage:
    """Kernel faults folded by (kind, code, device): count, first/last seen, severity, action
    (``inspect_hardware`` once a fatal one came back after reboots), most recent first."""
    host = registry.get_host(session, name=name)
    rows = list_occurrences(session, host_id=host.id, since=since, limit=limit)
    return OccurrencesPage(host=name, occurrences=rows)


@router.get("/{name}/vllm")
def get_vllm(name: HostName, session: SessionDep, _: AdminDep) -> VllmStatus:
    """Current vLLM phase, health from the latest sample, latest startup plan and history."""
    host = registry.get_host(session, name=name)
    return vllm_status(session, host=host)
