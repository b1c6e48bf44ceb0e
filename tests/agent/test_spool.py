from pathlib import Path
from typing import Any

from agent.spool import MAGIC, Spool

BOOT = "boot-a"


def batch(n: int, *, samples: int = 0, lines: int = 0, events: int = 0) -> dict[str, Any]:
    return {
        "host": "spark-01",
        "boot_id": BOOT,
        "agent": {"version": "0.1.0", "pid": 1, "started_at": 0.0},
        "samples": [
            {"seq": n * 100 + i, "ts": 0.0, "mem": {"MemAvailable": 1}} for i in range(samples)
        ],
        "lines": [
            {
                "seq": n * 100 + i,
                "ts": 0.0,
                "source": "kmsg",
                "priority": 6,
                "kseq": n * 100 + i,
                "text": "x" * 200,
            }
            for i in range(lines)
        ],
        "events": [
            {"seq": n * 100 + i, "ts": 0.0, "kind": "source_info", "data": {}}
            for i in range(events)
        ],
    }


def replay(spool: Spool) -> list[dict[str, Any]]:
    out = []
    while (b := spool.peek()) is not None:
        out.append(b)
        spool.pop()
    return out


def test_replay_in_order_across_segments_and_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 64 * 1024 * 8)  # 64 KiB segments
    for n in range(300):
        spool.append(batch(n, lines=1))
    assert len(list(tmp_path.glob("*.seg"))) > 1
    spool.close()
    reopened = Spool(tmp_path, 64 * 1024 * 8)
    assert reopened.max_kseq == {BOOT: 29900}
    got = replay(reopened)
    assert [b["lines"][0]["seq"] for b in got] == [n * 100 for n in range(300)]
    assert not reopened and list(tmp_path.glob("*.seg")) == []


def test_append_while_replaying_keeps_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    spool.append(batch(1, lines=1))
    assert spool.peek()["lines"][0]["seq"] == 100
    spool.append(batch(2, lines=1))  # arrives while the first is in flight
    spool.pop()
    spool.append(batch(3, lines=1))
    assert [b["lines"][0]["seq"] for b in replay(spool)] == [200, 300]


def test_torn_tail_is_truncated_and_appends_continue(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    for n in range(3):
        spool.append(batch(n, lines=2))
    spool.close()
    (seg,) = tmp_path.glob("*.seg")
    data = seg.read_bytes()
    seg.write_bytes(data[:-37])  # kill -9 in the middle of the last write
    reopened = Spool(tmp_path, 1 << 20)
    reopened.append(batch(7, lines=1))
    got = replay(reopened)
    assert [b["lines"][0]["seq"] for b in got] == [0, 100, 700]


def test_corrupt_record_in_the_middle_is_skipped(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    for n in range(3):
        spool.append(batch(n, lines=1))
    spool.close()
    (seg,) = tmp_path.glob("*.seg")
    data = bytearray(seg.read_bytes())
    second = data.find(MAGIC, 1)
    data[second + 40] ^= 0xFF  # flip a payload byte: crc mismatch
    seg.write_bytes(bytes(data))
    got = replay(Spool(tmp_path, 1 << 20))
    assert [b["lines"][0]["seq"] for b in got] == [0, 200]


def test_garbage_file_never_crashes(tmp_path: Path) -> None:
    (tmp_path / "00000001-0.seg").write_bytes(b"\x00garbage" * 100 + MAGIC + b"\xff\xff")
    (tmp_path / "stray.seg").write_bytes(b"whatever")
    spool = Spool(tmp_path, 1 << 20)
    assert spool.peek() is None
    spool.append(batch(1, lines=1))
    assert [b["lines"][0]["seq"] for b in replay(spool)] == [100]


def test_bounded_thins_samples_then_drops_samples_and_events_before_lines(tmp_path: Path) -> None:
    limit = 1 << 19  # 512 KiB, 64 KiB segments
    spool = Spool(tmp_path, limit)
    n = 0
    while spool.size < limit * 0.9:  # samples and events, with a few kernel lines
        spool.append(batch(n, samples=4, events=2, lines=1 if n % 10 == 0 else 0))
        n += 1
    kernel_lines = sum(1 for i in range(n) if i % 10 == 0)
    first = None
    while first is None:
        spool.append(batch(n, samples=4, events=2))
        n += 1
        assert spool.size <= limit
        first = spool.take_dropped()
    assert first["samples"] > 0 and first["events"] == 0 and first["lines"] == 0  # thinning first
    spool.append(batch(n, lines=1))
    for _ in range(200):
        spool.append(batch(n + 1, samples=4, events=2))
        assert spool.size <= limit
    dropped = spool.take_dropped()
    assert dropped is not None and dropped["lines"] == 0 and dropped["samples"] > 0
    got = replay(spool)
    kept_lines = sum(len(b["lines"]) for b in got)
    assert kept_lines == kernel_lines + 1  # not one kernel line dropped


def test_lines_dropped_only_when_nothing_else_is_left(tmp_path: Path) -> None:
    limit = 1 << 19
    spool = Spool(tmp_path, limit)
    for n in range(2000):
        spool.append(batch(n, lines=5))
        assert spool.size <= limit
    dropped = spool.take_dropped()
    assert dropped is not None and dropped["lines"] > 0
    got = replay(spool)
    seqs = [ln["seq"] for b in got for ln in b["lines"]]
    assert seqs == sorted(seqs) and seqs[-1] == 1999 * 100 + 4  # the oldest went, the newest stay
