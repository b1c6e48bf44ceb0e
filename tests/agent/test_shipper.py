import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from agent.deadletter import FailingBatch
from agent.delivery import SPLIT_AFTER
from agent.outbox import Outbox
from agent.shipper import Shipper
from agent.spool import Spool
from agent.state import AgentState
from agent.transport import Transport, Unavailable
from agent.wire import MAX_RETRY_DELAY_S

from .conftest import TOKEN, FakeCollector

BOOT = "4f0e7b3a-2c6d-4d1e-9a57-8b1f3c2e9d10"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def step(shipper: Shipper, timeout: float | None = None) -> None:
    """A step, then the answer to what it sent read (the next step would read it first)."""
    shipper.step(timeout=timeout)
    shipper.settle()


def make(
    tmp_path: Path, collector: FakeCollector, *, spool_bytes: int = 1 << 20
) -> tuple[Shipper, Outbox, Clock]:
    outbox = Outbox()
    clock = Clock()
    shipper = Shipper(
        host="spark-01",
        boot_id=BOOT,
        transport=Transport(collector.url, TOKEN, timeout=5),
        state=AgentState(tmp_path, "spark-01", BOOT),
        spool=Spool(tmp_path / "spool", spool_bytes),
        outbox=outbox,
        interval=3600.0,  # huge: anything shipped below was not waiting for the interval
        wall=lambda: 1764400000.0,
        mono=clock,
    )
    return shipper, outbox, clock


def line(kseq: int) -> dict[str, Any]:
    return {
        "ts": 1764400000.0,
        "source": "kmsg",
        "priority": 3,
        "facility": 0,
        "kseq": kseq,
        "text": f"l{kseq}",
    }


def sample() -> dict[str, Any]:
    return {"ts": 1764400000.0, "burst": False, "mem": {"MemAvailable": 1 << 30}}


def test_start_then_heartbeats(tmp_path: Path, collector: FakeCollector) -> None:
    shipper, _, clock = make(tmp_path, collector)
    shipper.start()
    (first,) = collector.batches
    assert [e["kind"] for e in first["events"]] == ["agent_started"]
    assert first["host"] == "spark-01" and first["boot_id"] == BOOT
    assert first["agent"]["version"] == "0.1.0"
    step(shipper, timeout=0)
    assert len(collector.batches) == 1  # interval not over: nothing sent
    clock.now += 3600
    step(shipper, timeout=0)
    assert len(collector.batches) == 2
    beat = collector.batches[1]
    assert (beat["samples"], beat["lines"], beat["events"]) == ([], [], [])


def test_kernel_lines_do_not_wait_for_the_interval(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, _ = make(tmp_path, collector)
    shipper.start()
    outbox.put_line(line(7))
    step(shipper, timeout=30)  # returns at once: the line woke it
    assert [ln["kseq"] for ln in collector.batches[-1]["lines"]] == [7]
    for k in range(8, 5008):  # a storm becomes one batch, not 5000 requests
        outbox.put_line(line(k))
    serviced: list[int] = []
    outbox.service = lambda: serviced.append(1)  # type: ignore[method-assign]
    step(shipper, timeout=30)
    assert len(serviced) == 5  # /dev/kmsg read ahead after each 1,000 encoded
    assert len(collector.batches) == 3
    assert [ln["kseq"] for ln in collector.batches[-1]["lines"]] == list(range(8, 5008))
    seqs = [ln["seq"] for b in collector.batches for ln in b["lines"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_collector_down_spools_then_replays_in_order(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock = make(tmp_path, collector)
    shipper.start()
    collector.stop()
    for k in range(1, 31):
        outbox.put_line(line(k))
        outbox.put_sample(sample())
        step(shipper, timeout=30)
        clock.now += 1
    assert shipper.spool and len(collector.batches) == 1
    collector.start()  # same port
    clock.now += 10
    outbox.put_line(line(31))
    step(shipper, timeout=30)
    assert not shipper.spool
    kseqs = [ln["kseq"] for b in collector.batches for ln in b["lines"]]
    assert kseqs == list(range(1, 32))
    sample_seqs = [s["seq"] for b in collector.batches for s in b["samples"]]
    assert len(sample_seqs) == 30 and sample_seqs == sorted(sample_seqs)


def test_5xx_means_unavailable_and_permanent_rejection_drops(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock = make(tmp_path, collector)
    shipper.start()
    collector.status = 503
    outbox.put_line(line(1))
    step(shipper, timeout=30)
    assert shipper.spool  # kept for later
    collector.status = 422
    clock.now += 10
    outbox.put_line(line(2))
    step(shipper, timeout=30)
    assert not shipper.spool  # both refused for good: dropped, not retried forever
    collector.status = 200
    outbox.put_line(line(3))
    step(shipper, timeout=30)
    assert collector.kseqs[BOOT] == [3]


def test_resume_kseq_skips_records_already_stored(tmp_path: Path, collector: FakeCollector) -> None:
    collector.ingest(
        {
            "boot_id": BOOT,
            "samples": [],
            "events": [],
            "lines": [{**line(k), "seq": 10**9 + k} for k in range(1, 51)],
        }
    )
    shipper, outbox, _ = make(tmp_path, collector)
    shipper.start()
    assert shipper.kseq_skip == 50
    for k in range(1, 61):  # a restarted agent re-reads the kernel ring from its start
        outbox.put_line(line(k))
    step(shipper, timeout=30)
    assert collector.kseqs[BOOT] == list(range(1, 61))
    assert collector.duplicate_kseqs == 0
    assert [ln["kseq"] for ln in collector.batches[-1]["lines"]] == list(range(51, 61))


def test_state_file_is_the_fallback_when_collector_is_down(
    tmp_path: Path, collector: FakeCollector
) -> None:
    state = AgentState(tmp_path, "spark-01", BOOT)
    state.kseq_acked = 45
    state.save()
    collector.stop()
    shipper, outbox, _ = make(tmp_path, collector)
    shipper.start()
    for k in range(40, 50):
        outbox.put_line(line(k))
    step(shipper, timeout=30)
    spooled = []
    while (b := shipper.spool.peek()) is not None:
        spooled += [ln["kseq"] for ln in b["lines"]]
        shipper.spool.pop()
    assert spooled == [46, 47, 48, 49]


def test_gap_since_last_run_is_an_overrun(tmp_path: Path, collector: FakeCollector) -> None:
    collector.ingest(
        {"boot_id": BOOT, "samples": [], "events": [], "lines": [{**line(10), "seq": 10**9}]}
    )
    shipper, outbox, _ = make(tmp_path, collector)
    shipper.start()
    outbox.put_line(line(25))  # the ring wrapped while the agent was down
    step(shipper, timeout=30)
    (overrun,) = collector.events("kmsg_overrun")
    assert overrun["data"] == {"lost": 14, "reason": "restart", "after_kseq": 10}


def test_finish_sends_agent_stopping_and_persists(tmp_path: Path, collector: FakeCollector) -> None:
    shipper, outbox, _ = make(tmp_path, collector)
    shipper.start()
    outbox.put_line(line(99))
    shipper.finish(shutdown=True)
    (stopping,) = collector.events("agent_stopping")
    assert stopping["data"] == {"shutdown": True}
    assert collector.kseqs[BOOT] == [99]
    assert AgentState(tmp_path, "spark-01", BOOT).kseq_acked == 99


def test_big_batches_are_gzipped(tmp_path: Path, collector: FakeCollector) -> None:
    seen: list[str | None] = []
    shipper, outbox, _ = make(tmp_path, collector)
    orig = collector.ingest

    def spy(batch: dict[str, Any]) -> dict[str, Any]:
        seen.append(str(len(batch["lines"])))
        return orig(batch)

    collector.ingest = spy  # type: ignore[method-assign]
    shipper.start()
    for k in range(1, 2001):
        outbox.put_line(line(k))
    step(shipper, timeout=30)
    assert seen == ["0", "2000"]  # a 2000-line batch (> 16 KiB, sent gzip) arrived intact


def test_replayed_batches_carry_the_sending_agent_and_its_boot(
    tmp_path: Path, collector: FakeCollector
) -> None:
    """A batch spooled in one boot and replayed by the next boot's agent keeps its records'
    boot_id, but says who sends it now: the collector's liveness follows agent.boot_id."""
    shipper, outbox, _ = make(tmp_path, collector)
    shipper.start()
    collector.stop()
    outbox.put_line(line(1))
    step(shipper, timeout=30)
    assert shipper.spool
    shipper.spool.close()
    collector.start()
    new_boot = "9d2a4c61-0f3e-4b8a-8c1d-2e5f6a7b8c90"
    after_reboot = Shipper(
        host="spark-01",
        boot_id=new_boot,
        transport=Transport(collector.url, TOKEN, timeout=5),
        state=AgentState(tmp_path, "spark-01", new_boot),
        spool=Spool(tmp_path / "spool", 1 << 20),
        outbox=Outbox(),
        interval=3600.0,
        wall=lambda: 1764500000.0,
        mono=Clock(),
    )
    after_reboot.start()
    replayed = next(b for b in collector.batches if b["lines"])
    assert replayed["boot_id"] == BOOT and [ln["kseq"] for ln in replayed["lines"]] == [1]
    assert replayed["agent"]["boot_id"] == new_boot
    assert replayed["agent"]["started_at"] == 1764500000.0
    assert collector.batches[-1]["agent"] == replayed["agent"]


def test_replay_is_coalesced_says_its_backlog_and_when_it_was_sent(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock = make(tmp_path, collector)
    shipper.start()
    collector.stop()
    for k in range(1, 601):  # a 30 s outage at 20 lines/s: one spooled batch per line
        outbox.put_line(line(k))
        step(shipper, timeout=30)
        clock.now += 0.05
    assert len(collector.batches) == 1
    collector.start()
    clock.now += 10
    outbox.put_line(line(601))
    step(shipper, timeout=30)
    replayed, live = collector.batches[1:-1], collector.batches[-1]
    assert len(replayed) <= 2  # not 600 POSTs
    assert [ln["kseq"] for b in replayed for ln in b["lines"]] == list(range(1, 601))
    assert replayed[-1]["backlog"] == live["backlog"] == {"bytes": 0}
    assert all(b["agent"]["sent_at"] == 1764400000.0 for b in replayed)


def test_drops_are_reported_once_cumulatively_and_never_spooled(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock = make(tmp_path, collector, spool_bytes=64 * 1024)  # it must drop
    shipper.start()
    collector.stop()
    for k in range(1, 1001):
        outbox.put_line(line(k))
        outbox.put_sample(sample())
        step(shipper, timeout=30)
        clock.now += 0.1
    ledger = shipper.state.drops
    assert ledger.totals["lines"] > 0 and ledger.pending()
    clock.now += 2  # the ledger is saved at most once a second while drops happen
    outbox.put_sample(sample())
    step(shipper, timeout=30)
    assert AgentState(tmp_path, "spark-01", BOOT).drops.totals == ledger.totals  # in state
    collector.start()
    clock.now += 10
    step(shipper, timeout=0)
    outbox.put_line(line(1001))
    step(shipper, timeout=30)
    (report,) = collector.events("spool_dropped")
    data = report["data"]
    assert {k: data[k] for k in ("samples", "lines", "events")} == ledger.totals
    assert data["ledger"] == ledger.ledger and data["reasons"] == ["spool_full"]
    assert data["first_ts"] == data["last_ts"] == 1764400000.0
    kept = len(collector.kseqs[BOOT])
    assert kept + data["lines"] == 1001  # every line stored or counted, none twice
    assert not ledger.pending()
    assert AgentState(tmp_path, "spark-01", BOOT).drops.reported == ledger.totals


def test_a_refusing_port_is_retried_every_interval_a_silent_one_backs_off(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock = make(tmp_path, collector)
    shipper.interval = 1.0
    shipper.start()
    collector.stop()  # the port now refuses
    attempts = []
    real = shipper.transport.send

    def counting(batch: dict[str, Any], ahead: Any = None) -> None:
        attempts.append(clock.now)
        real(batch, ahead)

    shipper.transport.send = counting  # type: ignore[method-assign]
    for _ in range(40):
        outbox.put_line(line(len(attempts) + 1))
        step(shipper, timeout=30)
        clock.now += 0.25
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps and max(gaps) <= 1.0  # within an interval of the collector's return

    def timing_out() -> dict[str, Any]:
        raise Unavailable("timed out")

    attempts.clear()
    shipper.transport.send = lambda batch, ahead=None: attempts.append(clock.now)  # type: ignore[method-assign]
    shipper.transport.receive = timing_out  # type: ignore[method-assign]
    for _ in range(200):
        outbox.put_line(line(1))
        step(shipper, timeout=30)
        clock.now += 0.25
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert max(gaps) == pytest.approx(MAX_RETRY_DELAY_S, abs=0.3)


def poison(status: int) -> Any:
    """The collector's answer to any batch holding the line ``poison`` (a test input)."""
    return lambda body: status if any(ln["text"] == "poison" for ln in body["lines"]) else None


def vline(text: str) -> dict[str, Any]:
    return {"ts": 1764400000.0, "source": "vllm", "text": text}


def dead_letters(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "dead-letter.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_batch_failing_with_5xx_never_holds_back_heartbeats_and_is_split_after_five(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, clock = make(tmp_path, collector)
    shipper.start()
    collector.refuse = poison(500)
    for text in ("before", "poison", "after"):
        outbox.put_line(vline(text))
    beats = []
    for _ in range(4):  # four 5xx answers in a row, backing off: the batch waits in the spool
        shipper.ship()
        shipper.settle()
        beats.append(collector.batches[-1])
        clock.now += MAX_RETRY_DELAY_S
    assert shipper.spool and not dead_letters(tmp_path)
    # every ship still reached the collector: an empty batch, so the host stays up
    assert [(b["samples"], b["lines"]) for b in beats] == [([], [])] * 4
    shipper.ship()  # the fifth failure: split until the failing line stands alone
    shipper.settle()
    assert not shipper.spool
    texts = [ln["text"] for b in collector.batches for ln in b["lines"]]
    assert sorted(texts) == ["after", "before"]
    (letter,) = dead_letters(tmp_path)
    assert letter["record"]["text"] == "poison" and "HTTP 500" in letter["why"]
    collector.refuse = None
    shipper.ship()
    shipper.settle()
    events = [e for b in collector.batches for e in b["events"] if e["kind"] == "dead_lettered"]
    assert [(e["data"]["lines"], e["data"]["file"]) for e in events] == [
        (1, str(tmp_path / "dead-letter.jsonl"))
    ]


@pytest.mark.parametrize("status", [502, 503, 504])
def test_an_outage_answered_not_now_waits_however_long_and_sets_no_record_aside(
    tmp_path: Path, collector: FakeCollector, status: int
) -> None:
    """The collector's database down (503), or a proxy's collector (502/504): the batch waits
    in the spool past SPLIT_AFTER answers, then goes whole; a 500 after them counts once."""
    shipper, outbox, clock = make(tmp_path, collector)
    shipper.start()
    collector.refuse = poison(status)
    for text in ("before", "poison", "after"):
        outbox.put_line(vline(text))
    for _ in range(SPLIT_AFTER * 3):
        shipper.ship()
        shipper.settle()
        clock.now += MAX_RETRY_DELAY_S
    assert shipper.spool and not dead_letters(tmp_path)
    assert not [ln for b in collector.batches for ln in b["lines"]]
    collector.refuse = poison(500)  # now a fault that may be a record's: the first of five
    shipper.ship()
    shipper.settle()
    assert shipper.spool and not dead_letters(tmp_path)
    collector.refuse = None
    clock.now += MAX_RETRY_DELAY_S
    shipper.ship()
    shipper.settle()
    assert not shipper.spool and not dead_letters(tmp_path)
    texts = [ln["text"] for b in collector.batches for ln in b["lines"]]
    assert texts == ["before", "poison", "after"]


def test_an_outage_longer_than_a_thousand_retries_still_backs_off() -> None:
    """A proxy answering 502 for an hour and a half (its collector down over a weekend), each
    answer waited out for at most MAX_RETRY_DELAY_S: the 1025th is waited out like the 5th
    (2 ** 1024 overflowed a float, and the exception ended the agent), and never splits."""
    now = [0.0]
    failing = FailingBatch(SPLIT_AFTER, 1.0, lambda: now[0], MAX_RETRY_DELAY_S)
    for _ in range(1100):
        assert not failing.failed(later=True)
        assert failing.waiting()
        now[0] += MAX_RETRY_DELAY_S
        assert not failing.waiting()


@pytest.mark.parametrize("status", [400, 422, 413])
def test_a_record_refused_for_good_is_set_aside_at_once_and_its_neighbours_delivered(
    tmp_path: Path, collector: FakeCollector, status: int
) -> None:
    shipper, outbox, _ = make(tmp_path, collector)
    shipper.start()
    collector.refuse = poison(status)
    for text in ("a", "poison", "b", "c"):
        outbox.put_line(vline(text))
    shipper.ship()
    shipper.settle()
    assert not shipper.spool
    assert sorted(ln["text"] for b in collector.batches for ln in b["lines"]) == ["a", "b", "c"]
    assert [d["record"]["text"] for d in dead_letters(tmp_path)] == ["poison"]


def test_no_answer_is_never_a_refusal_the_batch_stays_spooled(
    tmp_path: Path, collector: FakeCollector
) -> None:
    shipper, outbox, _ = make(tmp_path, collector)
    shipper.start()
    shipper.failing.split_after = 1
    collector.refuse = poison(500)
    outbox.put_line(vline("poison"))
    collector.stop()
    shipper.ship()
    shipper.settle()
    assert shipper.spool and not dead_letters(tmp_path)  # no answer is not a refusal
