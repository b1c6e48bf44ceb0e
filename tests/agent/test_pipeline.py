"""Pipelined shipping: a batch is left in flight and its answer read before the next goes
(in a burst, the next batch is built meanwhile), and still every record is stored once, in
order, through 5xx answers, refusals and outages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent import delivery as delivery_module
from agent import shipper as shipper_module
from agent.outbox import Outbox, size
from agent.shipper import Shipper
from agent.spool import Spool
from agent.state import AgentState
from agent.transport import Transport

from .conftest import TOKEN, FakeCollector, wait_for
from .test_shipper import BOOT, Clock, dead_letters, line

BATCH = 300  # records per batch in these tests (the real limit is 20,000)
BURST = 2_000


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shipper_module, "MAX_BATCH_RECORDS", BATCH)
    monkeypatch.setattr(delivery_module, "MAX_BATCH_RECORDS", BATCH)  # spool replay


class Recording(Transport):
    """The real transport, noting for each send whether the batch was built ahead (while
    the previous one was in flight) and when each answer was read."""

    def __init__(self, url: str) -> None:
        super().__init__(url, TOKEN, timeout=5)
        self.log: list[str] = []

    def send(self, batch: dict[str, Any], ahead: Any = None) -> None:
        self.log.append("send ahead" if ahead else "send")
        super().send(batch, ahead)

    def receive(self) -> dict[str, Any]:
        self.log.append("answer")
        return super().receive()


def make(tmp_path: Path, collector: FakeCollector) -> tuple[Shipper, Outbox, Clock, Recording]:
    outbox, clock = Outbox(), Clock()
    transport = Recording(collector.url)
    shipper = Shipper(
        host="spark-01",
        boot_id=BOOT,
        transport=transport,
        state=AgentState(tmp_path, "spark-01", BOOT),
        spool=Spool(tmp_path / "spool", 64 << 20),
        outbox=outbox,
        interval=3600.0,
        wall=lambda: 1764400000.0,
        mono=clock,
    )
    return shipper, outbox, clock, transport


def burst(outbox: Outbox, kseqs: range) -> None:
    for k in kseqs:
        outbox.put_line(line(k))


def drain(shipper: Shipper, outbox: Outbox, clock: Clock, rounds: int = 100) -> None:
    for _ in range(rounds):
        shipper.step(timeout=0)
        clock.now += 0.25
    shipper.settle()


def stored_in_order(collector: FakeCollector) -> list[int]:
    """The kernel seqs of the stored lines, in the order the collector stored them."""
    return [ln["kseq"] for ln in collector.stream("lines")]


def test_a_burst_is_built_ahead_and_stored_once_in_order(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock, transport = make(tmp_path, collector)
    shipper.start()
    burst(outbox, range(1, BURST + 1))
    drain(shipper, outbox, clock)
    assert stored_in_order(collector) == list(range(1, BURST + 1))
    seqs = [ln["seq"] for ln in collector.stream("lines")]
    assert seqs == list(range(seqs[0], seqs[0] + BURST))  # no gap, no repeat
    batches = [b for b in collector.batches if b["lines"]]
    assert len(batches) == -(-BURST // BATCH)
    # pipelined: batches after the first were built while the one before was in flight, and
    # each was sent only once the one before it had its answer
    assert transport.log.count("send ahead") >= BURST // BATCH - 1
    for i, entry in enumerate(transport.log):
        if entry.startswith("send") and i:
            assert transport.log[i - 1] == "answer"


def test_a_quiet_streams_answer_is_read_at_the_next_send_not_waited_for(
    tmp_path: Path, collector: FakeCollector
) -> None:
    """One line at a time: each batch is left in flight (the thread goes back to waiting for
    the next line, not for the answer); the answer is read before the next batch is sent."""
    shipper, outbox, _, transport = make(tmp_path, collector)
    shipper.start()
    transport.log.clear()
    for k in range(1, 6):
        outbox.put_line(line(k))
        shipper.step(timeout=0)
        assert shipper._in_flight is not None and shipper._in_flight[0]["lines"][0]["kseq"] == k
        wait_for(lambda k=k: collector.kseqs.get(BOOT, [0])[-1] == k)  # stored meanwhile, unasked
    shipper.settle()
    assert shipper._in_flight is None and shipper.kseq_acked == 5
    # a one-line batch has nothing worth encoding ahead: it is encoded whole, in one call
    assert transport.log == ["send"] + ["answer", "send"] * 4 + ["answer"]
    assert stored_in_order(collector) == [1, 2, 3, 4, 5]


def test_a_5xx_mid_burst_holds_everything_behind_it_in_order(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock, _ = make(tmp_path, collector)
    shipper.start()
    failed = []

    def fail_third_once(body: dict[str, Any]) -> int | None:
        kseqs = [ln["kseq"] for ln in body["lines"]]
        if 2 * BATCH + 1 in kseqs and not failed:
            failed.append(kseqs)
            return 503
        return None

    collector.refuse = fail_third_once
    burst(outbox, range(1, BURST + 1))
    drain(shipper, outbox, clock)
    assert failed and shipper.spool  # the failed batch waits, backing off; the rest behind it
    clock.now += shipper.interval  # its retry is due
    drain(shipper, outbox, clock)
    assert not shipper.spool
    assert stored_in_order(collector) == list(range(1, BURST + 1))


def test_an_outage_mid_burst_spools_in_order_and_replays_once(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock, transport = make(tmp_path, collector)
    shipper.start()
    burst(outbox, range(1, BURST + 1))
    shipper.step(timeout=0)
    shipper.step(timeout=0)
    assert transport.log[-1] == "send ahead"  # a batch in flight
    collector.stop()  # down with it unanswered (or its answer lost): it and the rest spool
    drain(shipper, outbox, clock, rounds=20)
    assert shipper.spool and not len(outbox)
    collector.start()
    clock.now += 60
    shipper.ship()  # the next heartbeat replays the spool
    assert not shipper.spool
    assert stored_in_order(collector) == list(range(1, BURST + 1))


def test_a_poison_record_mid_burst_is_dead_lettered_and_the_rest_stay_in_order(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock, _ = make(tmp_path, collector)
    shipper.start()
    poison_kseq = BATCH + 17
    collector.refuse = lambda body: (
        422 if any(ln["kseq"] == poison_kseq for ln in body["lines"]) else None
    )
    burst(outbox, range(1, BURST + 1))
    drain(shipper, outbox, clock)
    assert stored_in_order(collector) == [k for k in range(1, BURST + 1) if k != poison_kseq]
    assert [d["record"]["kseq"] for d in dead_letters(tmp_path)] == [poison_kseq]


def test_the_outbox_hands_out_a_burst_within_the_batch_limits() -> None:
    outbox = Outbox()
    lines = [{"source": "vllm", "text": "x" * n} for n in (10, 2000, 30, 40)]
    for ln in lines:
        outbox.put_line(ln)
    outbox.put_event({"kind": "e"})
    _, taken, events = outbox.drain(3, 10**9)  # record limit: the event counts too
    assert events == [{"kind": "e"}] and taken == lines[:2]
    budget = size(lines[2]) + size(lines[3])
    assert outbox.drain(100, budget - 1)[1] == [lines[2]]  # byte limit
    assert outbox.drain(100, 10**9)[1] == [lines[3]]
    assert not len(outbox)
    for ln in lines:  # all of it at once when it fits, and what is left is counted right
        outbox.put_line(ln)
    assert outbox.drain(100, 10**9)[1] == lines
    outbox.put_line(lines[0])
    assert outbox.drain(100, size(lines[0]))[1] == [lines[0]]
