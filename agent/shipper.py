"""Turns queued records into sequenced batches and delivers them: collector first, else spool."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from agent import __version__
from agent.frames import count
from agent.outbox import Outbox
from agent.spool import Spool
from agent.state import AgentState
from agent.transport import Rejected, Unavailable
from agent.wire import MAX_BATCH_BYTES, MAX_BATCH_RECORDS, MAX_RETRY_DELAY_S

log = logging.getLogger(__name__)

BATCH_BYTES = MAX_BATCH_BYTES // 2  # stay well under the collector's limit
# Acked kernel position is persisted at most this often, and only when it moved (no write while
# the kernel is quiet): after a freeze the next boot's catch-up starts from it.
STATE_FLUSH_S = 10.0
DROPS_FLUSH_S = 1.0  # the drop ledger, while drops happen: a kill -9 costs at most this much
DROPS_LOG_S = 60.0
STORED, DOWN, REJECTED = "stored", "down", "rejected"


class Poster(Protocol):
    def post(self, batch: dict[str, Any]) -> dict[str, Any]: ...
    def close(self) -> None: ...


class Shipper:
    """One thread's worth of shipping: ``start``, then ``step`` in a loop, then ``finish``."""

    def __init__(
        self,
        *,
        host: str,
        boot_id: str,
        transport: Poster,
        state: AgentState,
        spool: Spool,
        outbox: Outbox,
        interval: float = 1.0,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.boot_id = boot_id
        self.transport = transport
        self.state = state
        self.spool = spool
        self.outbox = outbox
        self.interval = interval
        self._wall = wall
        self._mono = mono
        # Who sends, stamped on every batch at send time (also on replayed spool and catch-up
        # batches, whose records may belong to an earlier boot): the collector takes liveness
        # and the host's current boot from here, not from the records' boot_id.
        self.agent_info = {
            "version": __version__,
            "pid": os.getpid(),
            "started_at": wall(),
            "boot_id": boot_id,
        }
        # Highest kseq handed off (acked or spooled) for this boot: re-read records are skipped.
        hints = [k for k in (state.kseq_acked, spool.max_kseq.get(boot_id)) if k is not None]
        self.kseq_skip: int | None = max(hints) if hints else None
        self.kseq_acked: int | None = state.kseq_acked
        self.kmsg_usec_acked: int | None = state.kmsg_usec_acked
        self._flushed_at = mono()
        self._drops_dirty = False
        self._drops_logged_at = -1e18
        self._careful = 0  # frames to replay one by one (a merged replay was refused)
        self._resumed = False  # kseq_skip confirmed by the collector
        self._first_line = True
        self._up = True
        self._retry_at = 0.0
        self._retry_delay = min(interval, 1.0)
        self._last_send = -1e18

    # -- public steps ----------------------------------------------------------------------

    def start(self, **started: Any) -> None:
        """First batch: ``agent_started`` (no lines yet), to learn ``resume.kseq`` first;
        ``started`` joins its data (e.g. ``guard``: the guard's state and rules)."""
        self.event("agent_started", previous_boot_id=self.state.previous_boot_id, **started)
        self.ship(include_lines=False)

    def step(self, timeout: float | None = None) -> None:
        """Wait for queued records or the heartbeat interval, then ship what is queued."""
        due = self._last_send + self.interval - self._mono()
        wait = max(0.0, due if timeout is None else min(timeout, due))
        woken = self.outbox.wait(wait)
        if woken or self._mono() >= self._last_send + self.interval:
            self.ship()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.step()

    def finish(self, *, shutdown: bool) -> None:
        """SIGTERM: ship everything queued plus ``agent_stopping``, persist state."""
        for _ in range(100):  # bounded: a source may still be emitting
            if not len(self.outbox):
                break
            self.ship()
        self.event("agent_stopping", shutdown=shutdown)
        self.ship()
        self.state.kseq_acked = self.kseq_acked
        self.state.kmsg_usec_acked = self.kmsg_usec_acked
        self.state.save(clean=True)
        self.spool.close()
        self.transport.close()

    def event(self, kind: str, **data: Any) -> None:
        self.outbox.put_event({"ts": round(self._wall(), 6), "kind": kind, "data": data})

    # -- batching --------------------------------------------------------------------------

    def ship(self, *, include_lines: bool = True) -> None:
        """Build one batch from the outbox (empty = heartbeat) and deliver it."""
        samples, lines, events = self.outbox.drain(
            MAX_BATCH_RECORDS, BATCH_BYTES, lines=include_lines
        )
        lines = self._filter_kmsg(lines, events)
        batch = {
            "host": self.host,
            "boot_id": self.boot_id,
            "agent": self.agent_info,
            "samples": [self._seq("samples", s) for s in samples],
            "lines": [self._seq("lines", ln) for ln in lines],
            "events": [self._seq("events", e) for e in events],
        }
        self._last_send = self._mono()
        self.deliver(batch)
        self._flush_state()

    def _flush_state(self) -> None:
        since = self._mono() - self._flushed_at
        moved = self.kseq_acked != self.state.kseq_acked and since >= STATE_FLUSH_S
        if not (moved or (self._drops_dirty and since >= DROPS_FLUSH_S)):
            return
        self._flushed_at = self._mono()
        self.state.kseq_acked = self.kseq_acked
        self.state.kmsg_usec_acked = self.kmsg_usec_acked
        self._drops_dirty = not self.state.save()

    def _seq(self, stream: str, record: dict[str, Any]) -> dict[str, Any]:
        return {"seq": self.state.next_seq(stream), **record}

    def _filter_kmsg(
        self, lines: list[dict[str, Any]], events: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Drop kernel records already shipped this boot; a hole since the last run: overrun."""
        kept = []
        for line in lines:
            kseq = line.get("kseq")
            if line.get("source") != "kmsg" or kseq is None:
                kept.append(line)
                continue
            skip = self.kseq_skip
            if skip is not None and kseq <= skip:
                continue
            if self._first_line and self._resumed and skip is not None and kseq > skip + 1:
                data = {"lost": kseq - skip - 1, "reason": "restart", "after_kseq": skip}
                events.append({"ts": round(self._wall(), 6), "kind": "kmsg_overrun", "data": data})
            self._first_line = False
            self.kseq_skip = kseq
            kept.append(line)
        return kept

    # -- delivery --------------------------------------------------------------------------

    def deliver(self, batch: dict[str, Any]) -> None:
        """Spool first (in order), then this batch; unreachable → it joins the spool."""
        if self._replay_spool():
            outcome = self._post(batch, backlog=0)
            if outcome == REJECTED:
                self._count_drops(count(batch), ["rejected"])
            if outcome != DOWN:
                return
        if batch["samples"] or batch["lines"] or batch["events"]:
            self.spool.append(batch)
            dropped = self.spool.take_dropped()
            if dropped:
                self._count_drops(*dropped)

    def _count_drops(self, counts: dict[str, int], reasons: list[str]) -> None:
        if not self.state.drops.add(counts, reasons, round(self._wall(), 6)):
            return
        self._drops_dirty = True
        if self._mono() - self._drops_logged_at >= DROPS_LOG_S:  # at the bound: every batch
            self._drops_logged_at = self._mono()
            totals, why = self.state.drops.totals, ", ".join(self.state.drops.reasons)
            log.warning("records dropped (%s), %s so far (reported when the collector answers)",
                        why, totals)  # fmt: skip

    def _replay_spool(self) -> bool:
        """Replay spooled batches oldest first, coalesced into large batches (one per boot and
        batch limit); True once the spool is empty."""
        if not self._up and self._mono() < self._retry_at:
            return False
        while self.spool:
            # one record left for the drop report _post may add
            limit = 1 if self._careful else MAX_BATCH_RECORDS - 1
            found = self.spool.take(limit, BATCH_BYTES)
            if found is None:
                break
            batch, frames, size = found
            outcome = self._post(batch, backlog=max(0, self.spool.backlog_bytes - size))
            if outcome == DOWN:
                return False
            if outcome == REJECTED and frames > 1:
                self._careful = frames  # one bad frame must not cost its neighbours
                continue
            if outcome == REJECTED:
                self._count_drops(count(batch), ["rejected"])
            self._careful = max(0, self._careful - frames)
            self.spool.pop(frames)
        return True

    def _post(self, batch: dict[str, Any], *, backlog: int) -> str:
        """Send one batch: STORED, DOWN (keep it) or REJECTED (refused for good).

        Each POST says when it was sent (the collector measures the clock offset) and how much
        spool is left after it; one of the current boot also carries the drop report if the
        ledger has news (never spooled: it goes with whatever POST the collector answers).
        """
        body = {
            **batch,
            "agent": {**self.agent_info, "sent_at": round(self._wall(), 6)},
            "backlog": {"bytes": backlog},
        }
        report = None
        if batch.get("boot_id") == self.boot_id and self.state.drops.pending():
            report = self.state.drops.report()
            event = {"ts": round(self._wall(), 6), "kind": "spool_dropped", "data": report}
            body["events"] = [*batch.get("events", ()), self._seq("events", event)]
        try:
            answer = self.transport.post(body)
        except Rejected as exc:
            self._mark_up()
            log.error("collector rejected a batch for good (%s)", exc)
            return REJECTED
        except Unavailable as exc:
            self._mark_down(exc)
            return DOWN
        self._mark_up()
        if report is not None:
            self.state.drops.acknowledge(report)
            self._drops_dirty = True
        self._note_answer(batch, answer)
        return STORED

    def _note_answer(self, batch: dict[str, Any], answer: dict[str, Any]) -> None:
        if batch.get("boot_id") != self.boot_id:
            return
        resume = answer.get("resume")
        kseq = resume.get("kseq") if isinstance(resume, dict) else None
        shipped = [ln for ln in batch["lines"] if ln.get("kseq") is not None]
        acked = max(
            [
                k
                for k in (kseq, self.kseq_acked, *(ln["kseq"] for ln in shipped))
                if isinstance(k, int)
            ],
            default=None,
        )
        if shipped and shipped[-1]["kseq"] == acked:  # usec of the record we now stand at
            usec = (shipped[-1].get("fields") or {}).get("_SOURCE_MONOTONIC_TIMESTAMP")
            if usec is not None and str(usec).isdigit():
                self.kmsg_usec_acked = int(usec)
        self.kseq_acked = acked
        if isinstance(kseq, int):
            self._resumed = True
            if self.kseq_skip is None or kseq > self.kseq_skip:
                self.kseq_skip = kseq

    def _mark_up(self) -> None:
        if not self._up:
            log.info("collector reachable again")
        self._up = True
        self._retry_delay = min(self.interval, 1.0)

    def _mark_down(self, exc: Unavailable) -> None:
        """Back off, exponentially up to MAX_RETRY_DELAY_S; but while the collector's port
        refuses (it is restarting) retry every interval, to be back within one of its start."""
        if self._up:
            log.warning("collector unavailable (%s): spooling", exc)
        self._up = False
        if exc.refused:
            self._retry_delay = min(self.interval, 1.0)
        self._retry_at = self._mono() + self._retry_delay
        if not exc.refused:
            self._retry_delay = min(MAX_RETRY_DELAY_S, self._retry_delay * 2)
