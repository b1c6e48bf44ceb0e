"""Turns queued records into sequenced batches and delivers them: collector first, else spool.

Pipelined in a burst: when more records are queued as a batch goes out, the shipper does not
wait for its answer but builds (sequences and encodes) the next batch meanwhile; the answer
is read before that next batch is sent. So at most one batch is in flight, nothing is sent
before the batch ahead of it is stored, and a batch that fails takes the path it always did
(spooled, retried, split) with every later batch queued behind it: order and exactly-once
hold as without pipelining.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from agent import __version__
from agent.deadletter import DOWN, FAILED, REJECTED, STORED, DeadLetter, FailingBatch, isolate
from agent.frames import count, kmsg_position
from agent.outbox import Outbox
from agent.spool import Spool
from agent.state import AgentState
from agent.transport import Encoded, Rejected, Unavailable, encode_streams
from agent.wire import MAX_BATCH_BYTES, MAX_BATCH_RECORDS, MAX_RETRY_DELAY_S

log = logging.getLogger(__name__)

BATCH_BYTES = MAX_BATCH_BYTES // 2  # stay well under the collector's limit
# Acked kernel position is persisted at most this often, and only when it moved (no write while
# the kernel is quiet): after a freeze the next boot's catch-up starts from it.
STATE_FLUSH_S = 10.0
DROPS_FLUSH_S = 1.0  # the drop ledger, while drops happen: a kill -9 costs at most this much
DROPS_LOG_S = 60.0
SPLIT_AFTER = 5  # 5xx answers in a row to one batch before it is split to find the bad record
RECORD_FAULTS = (400, 413, 422)  # they blame a record, not the sender: it is found, set aside
# Records queued behind a batch as it goes out for the next one to be built while it is in
# flight; fewer cost too little to build for the overlap to matter, and are sent as now.
PIPELINE_MIN = 256


class Poster(Protocol):
    def send(self, batch: dict[str, Any], ahead: Encoded | None = None) -> None: ...
    def receive(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


# A batch sent and not yet answered: (the batch, its drop report if it carries one).
InFlight = tuple[dict[str, Any], dict[str, Any] | None]


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
        dead_letter: DeadLetter | None = None,
        split_after: int = SPLIT_AFTER,
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
        self.dead_letter = dead_letter or DeadLetter(state.path.parent, wall=wall)
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
        self.failing = FailingBatch(split_after, interval, mono, MAX_RETRY_DELAY_S)
        self._answer = (0, "")  # (status, text) of the last refusal
        self._resumed = False  # kseq_skip confirmed by the collector
        self._first_line = True
        self._up = True
        self._retry_at = 0.0
        self._retry_delay = min(interval, 1.0)
        self._last_send = -1e18
        self._in_flight: InFlight | None = None

    # -- public steps ----------------------------------------------------------------------

    def start(self, **started: Any) -> None:
        """First batch: ``agent_started`` (no lines yet), to learn ``resume.kseq`` first;
        ``started`` joins its data (e.g. ``guard``: the guard's state and rules)."""
        self.event("agent_started", previous_boot_id=self.state.previous_boot_id, **started)
        self.ship(include_lines=False)
        self.settle()  # its answer's resume.kseq decides which kernel lines are new

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
        self.settle()
        for _ in range(100):  # bounded: a source may still be emitting
            if not len(self.outbox):
                break
            self.ship()
        self.event("agent_stopping", shutdown=shutdown)
        self.ship()
        self.settle()
        self.state.kseq_acked = self.kseq_acked
        self.state.kmsg_usec_acked = self.kmsg_usec_acked
        self.state.save(clean=True)
        self.spool.close()
        self.transport.close()

    def event(self, kind: str, **data: Any) -> None:
        self.outbox.put_event({"ts": round(self._wall(), 6), "kind": kind, "data": data})

    # -- batching --------------------------------------------------------------------------

    def ship(self, *, include_lines: bool = True) -> None:
        """Build one batch from the outbox (empty = heartbeat) and deliver it; with more
        records queued behind it, it is left in flight (see the module's docstring)."""
        samples, lines, events = self.outbox.drain(
            MAX_BATCH_RECORDS, BATCH_BYTES, lines=include_lines
        )
        lines = self._filter_kmsg(lines, events)
        batch = {
            "host": self.host,
            "boot_id": self.boot_id,
            "agent": self.agent_info,
            "samples": self._seq("samples", samples),
            "lines": self._seq("lines", lines),
            "events": self._seq("events", events),
        }
        ahead = encode_streams(batch) if self._in_flight is not None else None
        self.settle()  # the batch ahead is answered (and handled) before this one goes
        self._last_send = self._mono()
        if self._replay_spool():
            self._send(batch, backlog=0, ahead=ahead)
            if len(self.outbox) < PIPELINE_MIN:  # no burst behind it: nothing to overlap
                self.settle()
        else:
            self._hold(batch)
        self._flush_state()

    def settle(self) -> None:
        """Read the answer to the batch in flight, if any, and handle it as ``deliver`` does."""
        if self._in_flight is None:
            return
        batch = self._in_flight[0]
        outcome = self._receive()
        if outcome in (REJECTED, FAILED):
            outcome = self._refused(batch, outcome)
        if outcome == STORED:
            self.failing.clear()
        else:
            self._hold(batch)

    def _flush_state(self) -> None:
        since = self._mono() - self._flushed_at
        moved = self.kseq_acked != self.state.kseq_acked and since >= STATE_FLUSH_S
        if not (moved or (self._drops_dirty and since >= DROPS_FLUSH_S)):
            return
        self._flushed_at = self._mono()
        self.state.kseq_acked = self.kseq_acked
        self.state.kmsg_usec_acked = self.kmsg_usec_acked
        self._drops_dirty = not self.state.save()

    def _seq(self, stream: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``records`` numbered in place (the outbox handed them over: they are ours)."""
        if records:
            first = self.state.next_seqs(stream, len(records))
            for seq, record in enumerate(records, first):
                record["seq"] = seq
        return records

    def _filter_kmsg(
        self, lines: list[dict[str, Any]], events: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Drop kernel records already shipped this boot; a hole since the last run: overrun."""
        kept: list[dict[str, Any]] = []
        keep = kept.append
        for line in lines:
            kseq = line.get("kseq")
            if kseq is None or line.get("source") != "kmsg":
                keep(line)
                continue
            skip = self.kseq_skip
            if skip is not None and kseq <= skip:
                continue
            if self._first_line and self._resumed and skip is not None and kseq > skip + 1:
                data = {"lost": kseq - skip - 1, "reason": "restart", "after_kseq": skip}
                events.append({"ts": round(self._wall(), 6), "kind": "kmsg_overrun", "data": data})
            self._first_line = False
            self.kseq_skip = kseq
            keep(line)
        return kept

    # -- delivery --------------------------------------------------------------------------

    def deliver(self, batch: dict[str, Any]) -> None:
        """Spool first (in order), then this batch; unreachable → it joins the spool."""
        self.settle()
        if self._replay_spool():
            if (outcome := self._post(batch, backlog=0)) in (REJECTED, FAILED):
                outcome = self._refused(batch, outcome)
            if outcome == STORED:
                return self.failing.clear()
        self._hold(batch)

    def _hold(self, batch: dict[str, Any]) -> None:
        """``batch`` was not delivered: it joins the spool (the heartbeat still goes)."""
        if batch["samples"] or batch["lines"] or batch["events"]:
            self.spool.append(batch)
            dropped = self.spool.take_dropped()
            if dropped:
                self._count_drops(*dropped)
        if self._up:  # the collector answers, a batch of ours fails: still show we are alive
            heartbeat = {**batch, "samples": [], "lines": [], "events": []}
            if self._post(heartbeat, backlog=self.spool.backlog_bytes) == FAILED:
                self._mark_down(Unavailable(f"HTTP {self._answer[0]} to a heartbeat"))

    def _refused(self, batch: dict[str, Any], outcome: str) -> str:
        """A 5xx: the batch waits (backing off) until the ``split_after``-th; then, or at once
        for a record fault, it goes in parts, the records refused alone set aside."""
        status = self._answer[0]
        if outcome == FAILED and not self.failing.failed():
            return FAILED
        if outcome == REJECTED and status not in RECORD_FAULTS:
            self._count_drops(count(batch), ["rejected"])  # 401/403: not this batch's fault
            return STORED

        def post(part: dict[str, Any]) -> tuple[str, str]:
            return self._post(part, backlog=self.spool.backlog_bytes), self._answer[1]

        outcome, refused = isolate(batch, post)
        if refused:
            self.event("dead_lettered", **self.dead_letter.add(str(batch["boot_id"]), refused))
        return outcome

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
        if self.failing.waiting():
            return False
        while self.spool:
            # one record left for the drop report _post may add
            found = self.spool.take(MAX_BATCH_RECORDS - 1, BATCH_BYTES)
            if found is None:
                break
            batch, frames, size = found
            outcome = self._post(batch, backlog=max(0, self.spool.backlog_bytes - size))
            if outcome in (REJECTED, FAILED):
                outcome = self._refused(batch, outcome)
            if outcome != STORED:
                return False
            self.failing.clear()
            self.spool.pop(frames)
        return True

    def _post(self, batch: dict[str, Any], *, backlog: int) -> str:
        """Send one batch and wait: STORED, DOWN (keep it), FAILED (a 5xx) or REJECTED (for
        good)."""
        self._send(batch, backlog=backlog)
        return self._receive()

    def _send(self, batch: dict[str, Any], *, backlog: int, ahead: Encoded | None = None) -> None:
        """Send one batch; ``_receive`` reads the answer.

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
            body["events"] = [*batch.get("events", ()), *self._seq("events", [event])]
        self.transport.send(body, ahead)
        self._in_flight = (batch, report)

    def _receive(self) -> str:
        assert self._in_flight is not None
        batch, report = self._in_flight
        self._in_flight = None
        try:
            answer = self.transport.receive()
        except Rejected as exc:
            self._mark_up()
            self._answer = (exc.status, str(exc))
            log.error("collector rejected a batch for good (%s)", exc)
            return REJECTED
        except Unavailable as exc:
            if exc.status is not None and exc.status >= 500:  # it answers: this batch failed
                self._mark_up()
                self._answer = (exc.status, str(exc))
                log.warning("collector failed a batch (%s)", exc)
                return FAILED
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
        self.kseq_acked, usec = kmsg_position(batch["lines"], kseq, self.kseq_acked)
        if usec is not None:
            self.kmsg_usec_acked = usec
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
