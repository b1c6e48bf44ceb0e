"""Turns queued records into sequenced batches for delivery (``agent.delivery``): collector
first, else spool.

A batch is left in flight when it is sent: its answer is read when the shipper next has
something to send (or to settle), before that is sent. So at most one batch is in flight,
nothing is sent before the batch ahead of it is stored, and a batch that fails takes the path
it always did (spooled, retried, split) with every later batch queued behind it: order and
exactly-once hold as if each answer were awaited. What it saves: a quiet host's kernel line
costs the agent's thread one wake-up (the line) instead of two (the line, then its answer,
milliseconds later), and each costs far more CPU than the work done in it (``bench/wakeup.py``).
In a burst, the next batch is built (sequenced and encoded) while one is in flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from agent.deadletter import DeadLetter
from agent.delivery import BATCH_BYTES, SPLIT_AFTER, Delivery, Poster
from agent.frames import kmsg_position
from agent.outbox import Outbox
from agent.spool import Spool
from agent.state import AgentState
from agent.transport import encode_streams
from agent.wire import MAX_BATCH_RECORDS

# Acked kernel position is persisted at most this often, and only when it moved (no write while
# the kernel is quiet): after a freeze the next boot's catch-up starts from it.
STATE_FLUSH_S = 10.0
DROPS_FLUSH_S = 1.0  # the drop ledger, while drops happen: a kill -9 costs at most this much


class Shipper(Delivery):
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
        super().__init__(
            boot_id=boot_id,
            transport=transport,
            state=state,
            spool=spool,
            interval=interval,
            dead_letter=dead_letter,
            split_after=split_after,
            wall=wall,
            mono=mono,
        )
        self.host = host
        self.outbox = outbox
        # Highest kseq handed off (acked or spooled) for this boot: re-read records are skipped.
        hints = [k for k in (state.kseq_acked, spool.max_kseq.get(boot_id)) if k is not None]
        self.kseq_skip: int | None = max(hints) if hints else None
        self.kseq_acked: int | None = state.kseq_acked
        self.kmsg_usec_acked: int | None = state.kmsg_usec_acked
        self._flushed_at = mono()
        self._resumed = False  # kseq_skip confirmed by the collector
        self._first_line = True
        self._last_send = -1e18

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
        """Build one batch from the outbox (empty = heartbeat) and send it, after reading the
        answer to the one in flight; it is left in flight (see the module's docstring)."""
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
        # encoded now, while one may be in flight; /dev/kmsg is read ahead between slices
        ahead = encode_streams(batch, between=self.outbox.service)
        self.settle()  # the batch ahead is answered (and handled) before this one goes
        self._last_send = self._mono()
        if self._replay_spool():
            self._send(batch, backlog=0, ahead=ahead)
        else:
            self._hold(batch)
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
