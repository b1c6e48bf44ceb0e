"""Per-host vLLM state kept between batches: the log parser's stream and the hang detectors.

One registry per collector process (reached through ``deps``); the rows are the truth. Each
batch with vLLM content takes the host's ``vllm_states`` row under a row lock and writes the
state back with its version bumped, so replicas behind a round-robin proxy take turns on one
host: a process whose copy is older than the row's continues from the row (``sync_shared``),
not from what it saw batches ago. A host without a saved stream has its parser rebuilt from
its stored lines.

A process that keeps finding the row where it left it (one collector, or a sticky proxy) stops
reading and locking it first: it writes the row only if the version is still its own, and a
batch that finds it moved is stored again from the row (``StaleState``). That read was a fifth
of the collector's CPU for a host serving vLLM. Such a batch takes its row lock last, after
what the batch implies; on PostgreSQL it never waits for a row another batch holds (that batch,
having locked the row first, may be waiting for what this one wrote): held counts as moved.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from sqlalchemy import Integer, bindparam, select, update
from sqlalchemy.orm import Session

from collector import db
from collector.models import HostEvent, VllmState, table_of
from collector.prepared import PerDialect, Prepared
from collector.schemas import WireSample, number
from collector.vllm.hang import HangDetector
from collector.vllm.store import VllmStream, restore_stream, stream_state


@dataclass
class HostVllmState:
    """One host's parser stream and per-endpoint hang detectors (``lock`` guards them)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    stream: VllmStream | None = None
    detectors: dict[str, HangDetector] = field(default_factory=dict)
    last_sample_ts: dict[str, float] = field(default_factory=dict)
    # Endpoints without vllm:* metrics (hang detection off), already reported.
    unwatchable: set[str] = field(default_factory=set)
    # The ``vllm_states`` row version this copy matches; -1: never synced.
    version: int = -1
    # Locked reads in a row that found the row at ``version`` (see OPTIMISTIC_AFTER).
    quiet_syncs: int = 0


class VllmStates:
    """Every host's ``HostVllmState``, keyed by host id."""

    def __init__(self, hang_stall_s: float = 15.0) -> None:
        self.hang_stall_s = hang_stall_s
        self._lock = threading.Lock()
        self._hosts: dict[int, HostVllmState] = {}

    def host(self, host_id: int) -> HostVllmState:
        with self._lock:
            return self._hosts.setdefault(host_id, HostVllmState())

    def forget(self, host_id: int) -> None:
        """Drop a host's state; it is rebuilt from storage on its next batch."""
        with self._lock:
            self._hosts.pop(host_id, None)


# Locked reads in a row that must find the row unmoved before a host's batches skip the read.
OPTIMISTIC_AFTER = 3


class StaleState(Exception):
    """Another process wrote the host's row since this process's copy: the batch's transaction
    is rolled back and the batch stored again, from the row."""


@dataclass
class SharedRow:
    """The host's ``vllm_states`` row as this batch found it (locked until it commits)."""

    host_id: int
    version: int


def sync_shared(session: Session, *, host_id: int, state: HostVllmState) -> SharedRow:
    """Lock the host's state row (created empty if missing); if another process wrote it since
    ``state`` was saved, load ``state`` from it. The caller saves it back (``save_shared``).
    Every batch with vLLM content comes here: the row's JSON is read only when it moved, and
    the row is not read at all once OPTIMISTIC_AFTER reads found it unmoved (``save_shared``
    then checks the version)."""
    if state.version >= 0 and state.quiet_syncs >= OPTIMISTIC_AFTER:
        return SharedRow(host_id, state.version)
    found = _VERSION(session).first(session, host_id=host_id)
    if found is None:
        _CREATE(session).rowcount(session, host_id=host_id)
        found = _VERSION(session).first(session, host_id=host_id)
        assert found is not None
    (version,) = found
    if version != state.version:
        stream, hang = _CONTENT.first(session, host_id=host_id) or (None, None)
        state.stream = None if stream is None else restore_stream(stream)
        hang = hang or {}
        state.detectors = {
            url: HangDetector.restore(d) for url, d in (hang.get("detectors") or {}).items()
        }
        state.last_sample_ts = dict(hang.get("last_sample_ts") or {})
        state.unwatchable = set(hang.get("unwatchable") or ())
        state.version = version
        state.quiet_syncs = 0
    else:
        state.quiet_syncs += 1
    return SharedRow(host_id, version)


def save_shared(
    session: Session, row: SharedRow, state: HostVllmState, *, lines: bool, samples: bool
) -> None:
    """Write what this batch moved (the parser after ``lines``, the detectors after
    ``samples``) to the row, one version on, if it is still at ``row.version`` (``StaleState``
    otherwise); the batch's transaction commits it."""
    values: dict[str, Any] = {
        "host_id": row.host_id,
        "expected": row.version,
        "version": row.version + 1,
    }
    if lines:
        values["stream"] = None if state.stream is None else stream_state(state.stream)
    if samples:
        values["hang"] = {
            "detectors": {url: d.state() for url, d in state.detectors.items()},
            "last_sample_ts": dict(state.last_sample_ts),
            "unwatchable": sorted(state.unwatchable),
        }
    if _SAVE[lines, samples](session).rowcount(session, **values) != 1:
        raise StaleState(f"host {row.host_id}: vLLM state moved past version {row.version}")
    state.version = row.version = row.version + 1


_TABLE = table_of(VllmState)
_HOST = _TABLE.c.host_id == bindparam("host_id", type_=Integer)


def _version(session: Session) -> Prepared:
    query = select(_TABLE.c.version).where(_HOST)
    # SQLite: the batch's transaction began IMMEDIATE, holding the one write lock already.
    return Prepared(query.with_for_update() if db.is_postgres(session) else query)


def _save(lines: bool, samples: bool, session: Session) -> Prepared:
    moved = {"version": bindparam("version", type_=Integer)}
    for name, changed in (("stream", lines), ("hang", samples)):
        if changed:
            moved[name] = bindparam(name, type_=_TABLE.c[name].type)
    expected = _TABLE.c.version == bindparam("expected", type_=Integer)
    save = update(_TABLE).where(_HOST, expected)
    if db.is_postgres(session):
        # A batch that skipped the locked read has written what it implies (a vLLM start, a
        # kernel occurrence) before this row; a replica holding the row may be waiting for
        # those. Waiting for it in turn would deadlock: a row held elsewhere counts as moved.
        # (A batch that read it under its lock holds it already: never skipped.)
        free = select(_TABLE.c.host_id).where(_HOST).with_for_update(skip_locked=True)
        save = save.where(_TABLE.c.host_id == free.scalar_subquery())
    return Prepared(save.values(**moved))


# Run on the driver, built once: every batch with vLLM content (every second from a host that
# serves vLLM) reads and writes the row.
_VERSION = PerDialect(_version)
_CONTENT = Prepared(select(_TABLE.c.stream, _TABLE.c.hang).where(_HOST))
_CREATE = PerDialect(
    lambda session: Prepared(
        db.insert(session, _TABLE)
        .values(host_id=bindparam("host_id", type_=Integer), version=0)
        .on_conflict_do_nothing()
    )
)
_BOTH = (False, True)
_SAVE = {
    (lines, samples): PerDialect(partial(_save, lines, samples))
    for lines in _BOTH
    for samples in _BOTH
}


def observe_samples(
    session: Session,
    *,
    host_id: int,
    samples: Sequence[WireSample],
    state: HostVllmState,
    stall_s: float = 15.0,
) -> list[HostEvent]:
    """Feed each sample's vLLM metrics to its endpoint's hang detector; store the verdicts.

    A healthy server whose /metrics has no ``vllm:*`` series (started with
    ``--disable-log-stats``) cannot be watched: that is reported once, as
    ``vllm_hang_detection_off``, not passed over in silence."""
    events = []
    for sample in sorted(samples, key=lambda s: s.ts):
        power = number(sample.first_gpu().get("power_w"))
        for entry in sample.vllm or []:
            url = str(entry.get("url") or "")
            running, tokens = number(entry.get("running")), number(entry.get("generation_tokens"))
            if running is None or tokens is None:
                if entry.get("health") == 200 and not entry.get("error"):
                    events += _detection_off(session, host_id, state, url, sample.ts)
                continue
            state.unwatchable.discard(url)
            last = state.last_sample_ts.get(url)
            if last is not None and sample.ts <= last:
                continue  # a replayed sample: the detector has moved past it
            state.last_sample_ts[url] = sample.ts
            detector = state.detectors.setdefault(url, HangDetector(stall_s))
            verdict = detector.observe(
                sample.ts,
                int(running),
                float(tokens),
                None if power is None else float(power),
                waiting=int(number(entry.get("waiting")) or 0),
                prompt_tokens=number(entry.get("prompt_tokens")),
                iteration_tokens=number(entry.get("iteration_tokens")),
                kv_usage=number(entry.get("kv_usage")),
            )
            if verdict is not None:
                data: dict[str, Any] = {**asdict(verdict), "url": url}
                data.pop("kind")
                events.append(
                    HostEvent(host_id=host_id, ts=verdict.ts, kind=verdict.kind, data=data)
                )
    session.add_all(events)
    return events


DETECTION_OFF = "vllm_hang_detection_off"


def _detection_off(
    session: Session, host_id: int, state: HostVllmState, url: str, ts: float
) -> list[HostEvent]:
    """The one ``vllm_hang_detection_off`` of an endpoint (also across collector restarts)."""
    if url in state.unwatchable:
        return []
    state.unwatchable.add(url)
    reported = session.scalars(
        select(HostEvent.data)
        .where(HostEvent.host_id == host_id, HostEvent.kind == DETECTION_OFF)
        .order_by(HostEvent.ts.desc())
        .limit(50)
    )
    if any((data or {}).get("url") == url for data in reported):
        return []
    reason = "no vllm:* metrics on /metrics (the server runs with --disable-log-stats?)"
    return [
        HostEvent(host_id=host_id, ts=ts, kind=DETECTION_OFF, data={"url": url, "reason": reason})
    ]
