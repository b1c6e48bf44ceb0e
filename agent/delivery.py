"""Delivers built batches, one in flight at a time: to the collector, else into the spool.

The spool is replayed oldest first before anything newer goes out. A batch the collector fails
(5xx) waits, backing off, and is split at the ``split_after``-th failure in a row (a 502, 503 or
504 only waits: an outage is nobody's record's fault); one refused
for a record's fault (400/413/422) is split at once; either way a record refused alone is
dead-lettered. An unreachable collector is retried with backoff (every interval while its port
refuses). What the spool drops is counted in the state's ledger and reported with a later POST.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

from agent import __version__
from agent.deadletter import DOWN, FAILED, REJECTED, STORED, DeadLetter, FailingBatch, isolate
from agent.frames import count
from agent.spool import Spool
from agent.state import AgentState
from agent.transport import Encoded, Rejected, Unavailable
from agent.wire import MAX_BATCH_BYTES, MAX_BATCH_RECORDS, MAX_RETRY_DELAY_S

# The shipper's name, as before delivery had a module of its own: its log lines read the same.
log = logging.getLogger("agent.shipper")

BATCH_BYTES = MAX_BATCH_BYTES // 2  # stay well under the collector's limit
DROPS_LOG_S = 60.0
SPLIT_AFTER = 5  # 5xx answers in a row to one batch before it is split to find the bad record
# "Not now": the collector (503: its database is down) or a proxy before it (502, 504).
LATER = (502, 503, 504)
RECORD_FAULTS = (400, 413, 422)  # they blame a record, not the sender: it is found, set aside


class Poster(Protocol):
    def send(self, batch: dict[str, Any], ahead: Encoded | None = None) -> None: ...
    def receive(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


# A batch sent and not yet answered: (the batch, its drop report if it carries one).
InFlight = tuple[dict[str, Any], dict[str, Any] | None]


class Delivery:
    """Delivers one agent's batches; the ``Shipper`` builds them, and gives ``event`` (queue
    an event) and ``_note_answer`` (what the answer to a stored batch says)."""

    def __init__(
        self,
        *,
        boot_id: str,
        transport: Poster,
        state: AgentState,
        spool: Spool,
        interval: float,
        dead_letter: DeadLetter | None,
        split_after: int,
        wall: Callable[[], float],
        mono: Callable[[], float],
    ) -> None:
        self.boot_id = boot_id
        self.transport = transport
        self.state = state
        self.spool = spool
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
        self._drops_dirty = False
        self._drops_logged_at = -1e18
        self.failing = FailingBatch(split_after, interval, mono, MAX_RETRY_DELAY_S)
        self._answer = (0, "")  # (status, text) of the last refusal
        self._up = True
        self._retry_at = 0.0
        self._retry_delay = min(interval, 1.0)
        self._in_flight: InFlight | None = None

    def event(self, kind: str, **data: Any) -> None:
        """Queue an event for a later batch (here: ``dead_lettered``)."""
        raise NotImplementedError

    def _note_answer(self, batch: dict[str, Any], answer: dict[str, Any]) -> None:
        """The collector stored ``batch`` and answered ``answer``."""
        raise NotImplementedError

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

    def _seq(self, stream: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``records`` numbered in place (the outbox handed them over: they are ours)."""
        if records:
            first = self.state.next_seqs(stream, len(records))
            for seq, record in enumerate(records, first):
                record["seq"] = seq
        return records

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
        if outcome == FAILED and not self.failing.failed(later=status in LATER):
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
