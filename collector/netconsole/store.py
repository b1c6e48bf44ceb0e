"""The netconsole channel's database side: raw datagrams first, then records as lines.

Each drained batch of datagrams is stored raw in one transaction before parsing; parsed records
become ``lines``
(``source=netconsole``) in a second one, merged with the agent's copy of the same kernel
record by (boot, kseq). Raw datagrams are kept ``keep_days`` and pruned hourly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from agent.kernel.classify import classify_kernel_line
from collector import db
from collector.hosts.registry import UNKNOWN_BOOT, boot_pk
from collector.ingest.rows import LINE_COLUMNS, line_row
from collector.kernel.alerting import enqueue_kernel_events
from collector.kernel.attribution import Site, attribute_reports, site_of
from collector.kernel.occurrences import DEFAULT_ESCALATE_AFTER
from collector.kernel.restated import NewRecord, fold_restatements
from collector.kernel.store import store_kernel_events
from collector.models import CHANNEL_NETCONSOLE, Host, NetconsoleDatagram, NetconsoleStats
from collector.netconsole.fit import record_fields, storable
from collector.netconsole.loss import MsgidTracker
from collector.netconsole.records import RawDatagram, ReceivedRecord
from collector.netconsole.stored_lines import KernelHit, stored_keyed_lines, stored_line
from collector.settings import Settings
from collector.timeutil import from_epoch

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 3600.0
STORE_CHUNK = 1000

RAW_COLUMNS = ("host_id", "source_addr", "source_port", "received_at", "raw")
RAW_NAMES = ", ".join(RAW_COLUMNS)


def _upsert_sql(mark: str) -> str:
    """Insert a netconsole record; on an existing (boot, kseq) row just add the channel.

    Netconsole rows have no ``seq``, so (boot_pk, kseq) is the only key they can hit, which
    makes it a safe arbiter on both SQLite and PostgreSQL.
    """
    return (
        f"INSERT INTO lines ({', '.join(LINE_COLUMNS)}) "
        f"VALUES ({', '.join([mark] * len(LINE_COLUMNS))}) "
        f"ON CONFLICT (boot_pk, kseq) DO UPDATE SET "
        f"channels = lines.channels | {CHANNEL_NETCONSOLE}, "
        "netconsole_received_at = "
        "COALESCE(lines.netconsole_received_at, excluded.netconsole_received_at)"
    )


class NetconsoleStore:
    """The receiver's ``persist_raw`` and ``on_records``: one transaction per call."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        keep_days: float = 7.0,
        clock: Callable[[], float] = time.time,
        settings: Settings | None = None,
    ) -> None:
        self._factory = factory
        self._keep_s = keep_days * 86400
        self._settings = settings  # None: kernel events are stored but do not alert
        self._escalate = (
            settings.kernel_escalate_after_reboots if settings else DEFAULT_ESCALATE_AFTER
        )
        self._clock = clock
        self._last_prune: float | None = None
        self._boots: dict[tuple[int, str], int] = {}
        self.trackers: dict[tuple[int, str], MsgidTracker] = {}  # (host id, sender IP)

    def persist_raw(self, batch: list[RawDatagram]) -> tuple[int, int] | None:
        """Store the batch in one transaction; returns its (first, last) id.

        The receive thread is the table's only writer, so a batch's ids are consecutive and
        the last one is the table's highest. Rows are plain tuples and go in as one prepared
        executemany (SQLite) or one COPY (PostgreSQL): no per-row ORM work on the hot path.
        """
        if not batch:
            return None
        rows = [(int(d.host), d.addr[0], d.addr[1], d.received_at, d.raw) for d in batch]
        with db.session_scope(self._factory) as session:
            db.copy_rows(session, "netconsole_datagrams", RAW_COLUMNS, rows)
            conn = session.connection()
            last = int(
                conn.exec_driver_sql("SELECT max(id) FROM netconsole_datagrams").scalar_one()
            )
            now = self._clock()
            if self._last_prune is None or now - self._last_prune >= PRUNE_EVERY_S:
                self._last_prune = now
                prune_datagrams(session, before=now - self._keep_s)
        return last - len(rows) + 1, last

    def load_raw(self, first: int, last: int, limit: int) -> list[tuple[int, RawDatagram | None]]:
        """Stored datagrams with ids in [first, last], oldest first, at most ``limit``; the
        datagram is None where its host has been deleted since."""
        with db.session_scope(self._factory) as session:
            mark = db.param_mark(session)
            result = session.connection().exec_driver_sql(
                f"SELECT id, {RAW_NAMES} FROM netconsole_datagrams "
                f"WHERE id >= {mark} AND id <= {mark} ORDER BY id LIMIT {mark}",
                (first, last, limit),
            )
            return [
                (pk, None if host is None else RawDatagram(bytes(raw), (ip, port), at, str(host)))
                for pk, host, ip, port, at, raw in result
            ]

    def on_records(self, records: list[ReceivedRecord]) -> None:
        """Store in transactions of ``STORE_CHUNK``: short write locks leave room for the raw
        inserts of the receive thread (SQLite has one writer)."""
        failed: Exception | None = None
        for i in range(0, len(records), STORE_CHUNK):
            try:
                with db.session_scope(self._factory) as session:
                    self.store_records(session, records[i : i + STORE_CHUNK])
            except Exception as exc:  # the other chunks still go in
                self.forget_boots()  # a rolled-back transaction may have created cached boots
                failed = failed or exc
        if failed is not None:
            raise failed

    def store_records(self, session: Session, records: list[ReceivedRecord]) -> None:
        keyed: list[tuple[Any, ...]] = []
        plain: list[tuple[Any, ...]] = []
        hits: list[KernelHit] = []  # records naming a kernel event (a few substring tests each)
        sites: dict[tuple[int, int], list[Site]] = {}  # RIP/pc lines naming a module
        hosts: dict[int, Host | None] = {}
        stats: dict[int, list[float]] = {}  # host id → [received, lost delta, incomplete, last]
        for rec in records:
            host_id = int(rec.host)
            if host_id not in hosts:
                hosts[host_id] = session.get(Host, host_id)
            host = hosts[host_id]
            if host is None:  # deleted since the allowlist was loaded
                continue
            r, escaped = storable(rec.record)
            boot = self._boot_pk(session, host, r.boot or host.current_boot_id or UNKNOWN_BOOT)
            counts = stats.setdefault(host_id, [0, 0, 0, 0.0])
            counts[0] += 1
            if r.msgid is not None:
                tracker = self.trackers.get((host_id, rec.addr[0]))
                if tracker is None:
                    tracker = self.trackers[(host_id, rec.addr[0])] = MsgidTracker()
                counts[1] += tracker.observe(r.msgid)
            counts[2] += int(r.incomplete)
            counts[3] = max(counts[3], rec.received_at)
            row = line_row(
                (host_id, boot, rec.received_at),
                seq=None,
                kseq=r.kseq,
                ts=rec.received_at,  # no wall time in the record: ours stands in
                source="netconsole",
                priority=r.level,
                facility=r.facility,
                text=r.text,
                truncated=r.incomplete,
                fields=record_fields(r),
                channel=CHANNEL_NETCONSOLE,
                escaped=escaped,
            )
            (keyed if r.kseq is not None else plain).append(row)
            event = classify_kernel_line(r.text)
            if event is not None:
                boot_id = r.boot or host.current_boot_id
                hits.append(KernelHit(host, boot, boot_id, replace(rec, record=r), event))
            else:
                site = site_of(r.text)
                if site is not None:
                    sites.setdefault((host_id, boot), []).append((rec.received_at, *site))
        if keyed:
            session.connection().exec_driver_sql(_upsert_sql(db.param_mark(session)), keyed)
        db.copy_rows(session, "lines", LINE_COLUMNS, plain)
        for host_id, (received, lost, incomplete, last) in stats.items():
            counters = session.get(NetconsoleStats, host_id)
            if counters is None:
                counters = NetconsoleStats(host_id=host_id, received=0, lost_msgid=0, incomplete=0)
                session.add(counters)
            counters.received += int(received)
            counters.lost_msgid += int(lost)
            counters.incomplete += int(incomplete)
            counters.last_line_at = max(counters.last_line_at or 0.0, last)
        session.flush()
        if hits:
            self._kernel_events(session, hits)
        for (host_id, boot), found in sites.items():
            attribute_reports(session, host_id=host_id, boot_pk=boot, sites=found)

    def _kernel_events(self, session: Session, hits: list[KernelHit]) -> None:
        """Ingest's kernel-event hook for the records just stored: classify, correlate, alert.

        A record the agent brought first already has its event (the unique ``line_id``
        skips it), so a record arriving by both channels is one event.
        """
        groups: dict[tuple[int, int], list[NewRecord]] = {}
        boot_ids: dict[tuple[int, int], str | None] = {}
        keyed = stored_keyed_lines(session, [h for h in hits if h.rec.record.kseq is not None])
        for hit in hits:
            r = hit.rec.record
            stored = (
                keyed.get((hit.boot_pk, r.kseq))
                if r.kseq is not None
                else stored_line(session, hit)
            )
            if stored is not None:
                key = (hit.host.id, hit.boot_pk)
                record = NewRecord(*stored, r.kseq, r.usec, r.text, hit.event)
                groups.setdefault(key, []).append(record)
                boot_ids[key] = hit.boot_id
        now = from_epoch(self._clock())
        for (host_id, boot), found in groups.items():
            # a record restating a report already counted (either channel's) is no event
            new = fold_restatements(session, boot_pk=boot, records=found)
            events = store_kernel_events(
                session, host_id=host_id, boot_pk=boot, hits=new, escalate_after=self._escalate
            )
            if events and self._settings is not None:
                enqueue_kernel_events(
                    session,
                    host_id=host_id,
                    events=events,
                    boot_id=boot_ids[(host_id, boot)] or UNKNOWN_BOOT,
                    now=now,
                    settings=self._settings,
                )
        session.flush()

    def _boot_pk(self, session: Session, host: Host, boot_id: str) -> int:
        key = (host.id, boot_id)
        pk = self._boots.get(key)
        if pk is None:
            pk = self._boots[key] = boot_pk(session, host=host, boot_id=boot_id)
        return pk

    def forget_boots(self) -> None:
        """Drop the boot-id cache (a rolled-back transaction may have created cached rows)."""
        self._boots.clear()


def prune_datagrams(session: Session, *, before: float) -> int:
    """Delete raw datagrams received before ``before`` (epoch s); returns how many."""
    result = session.execute(
        delete(NetconsoleDatagram).where(NetconsoleDatagram.received_at < before)
    )
    return max(getattr(result, "rowcount", 0) or 0, 0)
