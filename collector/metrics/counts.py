"""Counters from stored rows (incidents, kernel events, alert deliveries, netconsole) and the
canary latency per channel, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from collector.hosts.registry import list_hosts
from collector.models import UNRESOLVED, Delivery, DeliveryState, Incident, KernelEventRow
from collector.netconsole.health import canary_report, netconsole_report

# Fault codes are parsed from kernel text; past this many per (host, kind) the rest are "other",
# so a flood of odd lines cannot grow the label set without bound.
MAX_CODES_PER_KIND = 64
# Canary latency over a short window: what the channels do now, and a cheap query.
CANARY_WINDOW_S = 600.0


def count_metrics(session: Session, *, now: float) -> Iterator[Metric]:
    names = {h.id: h.name for h in list_hosts(session)}
    yield from incidents(session, names)
    yield kernel_events(session, names)
    yield deliveries(session)
    yield from channels(session, names, now=now)


def incidents(session: Session, names: dict[int, str]) -> Iterator[Metric]:
    opened = CounterMetricFamily(
        "freezewatch_incidents_opened", "Incidents opened, by kind.", labels=["host", "kind"]
    )
    resolved = CounterMetricFamily(
        "freezewatch_incidents_resolved",
        "Incidents resolved, by kind and resolution (what the silence turned out to be).",
        labels=["host", "kind", "resolution"],
    )
    open_now = GaugeMetricFamily(
        "freezewatch_incidents_open", "Incidents not yet resolved.", labels=["host", "kind"]
    )
    rows = session.execute(
        select(
            Incident.host_id, Incident.kind, Incident.state, Incident.resolution, func.count()
        ).group_by(Incident.host_id, Incident.kind, Incident.state, Incident.resolution)
    ).all()
    totals: dict[tuple[str, ...], float] = {}
    unresolved: dict[tuple[str, ...], float] = {}
    done: dict[tuple[str, ...], float] = {}
    for host_id, kind, state, resolution, n in rows:
        host = names.get(host_id)
        if host is None:
            continue
        totals[(host, kind)] = totals.get((host, kind), 0) + n
        if state in UNRESOLVED:
            unresolved[(host, kind)] = unresolved.get((host, kind), 0) + n
        else:
            key = (host, kind, resolution or "none")
            done[key] = done.get(key, 0) + n
    for family, values in ((opened, totals), (open_now, unresolved), (resolved, done)):
        for labels, value in sorted(values.items()):
            family.add_metric(list(labels), value)
    yield from (opened, resolved, open_now)


def kernel_events(session: Session, names: dict[int, str]) -> Metric:
    family = CounterMetricFamily(
        "freezewatch_kernel_events",
        "Classified kernel lines, by kind and code (the Xid number or the NV_ERR_* name).",
        labels=["host", "kind", "code"],
    )
    rows = session.execute(
        select(KernelEventRow.host_id, KernelEventRow.kind, KernelEventRow.xid,
               KernelEventRow.nv_err, func.count())
        .group_by(KernelEventRow.host_id, KernelEventRow.kind, KernelEventRow.xid,
                  KernelEventRow.nv_err)
        .order_by(func.count().desc())
    ).all()  # fmt: skip
    values: dict[tuple[str, str, str], float] = {}
    codes: dict[tuple[str, str], set[str]] = {}
    for host_id, kind, xid, nv_err, n in rows:
        host = names.get(host_id)
        if host is None:
            continue
        code = str(xid) if xid is not None else (nv_err or "")
        seen = codes.setdefault((host, kind), set())
        if code not in seen and len(seen) >= MAX_CODES_PER_KIND:
            code = "other"
        seen.add(code)
        values[(host, kind, code)] = values.get((host, kind, code), 0) + n
    for labels, value in sorted(values.items()):
        family.add_metric(list(labels), value)
    return family


def deliveries(session: Session) -> Metric:
    family = GaugeMetricFamily(
        "freezewatch_alert_deliveries",
        "Alert outbox rows by state (pending includes those backing off after a failure).",
        labels=["state"],
    )
    counts = dict(
        session.execute(select(Delivery.state, func.count()).group_by(Delivery.state)).all()
    )
    for state in DeliveryState:
        family.add_metric([state.value], float(counts.get(state, 0)))
    return family


def channels(session: Session, names: dict[int, str], *, now: float) -> Iterator[Metric]:
    latency = GaugeMetricFamily(
        "freezewatch_host_canary_latency_seconds",
        f"Canary latency kernel → collector per channel over the last {CANARY_WINDOW_S:.0f} s.",
        labels=["host", "channel", "quantile"],
    )
    lost = GaugeMetricFamily(
        "freezewatch_host_canary_lost",
        f"Canaries lost per channel over the last {CANARY_WINDOW_S:.0f} s.",
        labels=["host", "channel"],
    )
    netconsole = {
        key: CounterMetricFamily(f"freezewatch_host_netconsole_{key}", help_, labels=["host"])
        for key, help_ in (
            ("received", "netconsole records received from the host."),
            ("lost_msgid", "netconsole records lost in transit (msgid gaps)."),
            ("incomplete", "netconsole records whose fragments never completed."),
        )
    }
    for host_id, host in sorted(names.items(), key=lambda kv: kv[1]):
        report = canary_report(
            session, host_id=host_id, expect=(), now=now, window_s=CANARY_WINDOW_S
        )
        for channel, canary in report.items():
            figures = canary.model_dump()
            for quantile, key in (("0.5", "p50_ms"), ("0.99", "p99_ms")):
                if figures.get(key) is not None:
                    latency.add_metric([host, channel, quantile], figures[key] / 1000.0)
            lost.add_metric([host, channel], float(figures.get("lost") or 0))
        stats = netconsole_report(session, host_id=host_id).model_dump()
        if stats["received"] or stats["lost_msgid"] or stats["incomplete"]:
            for key, family in netconsole.items():
                family.add_metric([host], float(stats[key]))
    yield from (latency, lost, *netconsole.values())
