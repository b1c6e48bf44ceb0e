from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent import diskio
from agent.frames import MAGIC, encode_frame, iter_frames, thin
from agent.spool import Spool
from tests.support.tmpfs import fill

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
        taken = spool.take_dropped()
        first = taken[0] if taken else None
    assert first["samples"] > 0 and first["events"] == 0 and first["lines"] == 0  # thinning first
    spool.append(batch(n, lines=1))
    for _ in range(200):
        spool.append(batch(n + 1, samples=4, events=2))
        assert spool.size <= limit
    dropped, reasons = spool.take_dropped() or ({}, [])
    assert dropped["lines"] == 0 and dropped["samples"] > 0 and reasons == ["spool_full"]
    got = replay(spool)
    kept_lines = sum(len(b["lines"]) for b in got)
    assert kept_lines == kernel_lines + 1  # not one kernel line dropped


def test_lines_dropped_only_when_nothing_else_is_left(tmp_path: Path) -> None:
    limit = 1 << 19
    spool = Spool(tmp_path, limit)
    for n in range(2000):
        spool.append(batch(n, lines=5))
        assert spool.size <= limit
    dropped, _ = spool.take_dropped() or ({}, [])
    assert dropped["lines"] > 0
    got = replay(spool)
    seqs = [ln["seq"] for b in got for ln in b["lines"]]
    assert seqs == sorted(seqs) and seqs[-1] == 1999 * 100 + 4  # the oldest went, the newest stay


class Disk:
    """Free space the spool sees: ``free`` bytes, less what it wrote since (a full disk)."""

    def __init__(self, directory: Path, free: int) -> None:
        self.directory, self.free = directory, free

    def used(self) -> int:
        return sum(p.stat().st_size for p in self.directory.glob("*"))

    def __call__(self, _directory: Path) -> int:
        return max(0, self.free - self.used())


def test_take_coalesces_frames_of_one_boot_within_the_limits(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 22)
    for n in range(300):
        spool.append(batch(n, lines=1, samples=1))
    spool.append({**batch(300, lines=1), "boot_id": "boot-b"})
    found = spool.take(10_000, 1 << 24)
    assert found is not None
    merged, frames, size = found
    assert frames == 300 and size == spool.backlog_bytes - len(encode_frame(batch(300, lines=1)))
    assert [ln["seq"] for ln in merged["lines"]] == [n * 100 for n in range(300)]
    assert len(merged["samples"]) == 300 and merged["boot_id"] == BOOT
    spool.pop(frames)
    rest = spool.take(10_000, 1 << 24)
    assert rest is not None and rest[0]["boot_id"] == "boot-b" and rest[1] == 1
    limited = Spool(tmp_path / "other", 1 << 22)
    for n in range(10):
        limited.append(batch(n, lines=3))
    got = limited.take(7, 1 << 24)
    assert got is not None and got[1] == 2 and len(got[0]["lines"]) == 6  # 3 + 3 <= 7


def test_a_full_disk_is_the_bound_lines_go_last_and_nothing_rotates_per_append(
    tmp_path: Path,
) -> None:
    disk = Disk(tmp_path, free=600 * 1024)  # the spool's own bound is far larger
    spool = Spool(tmp_path, 256 << 20, room=disk)
    appended = 0
    for n in range(3000):
        spool.append(batch(n, samples=4, events=1, lines=1 if n % 10 == 0 else 0))
        appended += 1
        assert disk.used() <= disk.free  # it never writes past the disk's room
    dropped, reasons = spool.take_dropped() or ({}, [])
    assert reasons == ["disk_full"] and dropped["samples"] > 0 and dropped["lines"] == 0
    numbers = [int(p.name.split("-")[0]) for p in tmp_path.glob("*.seg")]
    assert max(numbers) < appended / 20  # segments fill up: not one per batch at the bound
    got = replay(spool)
    assert sum(len(b["lines"]) for b in got) == 300  # every kernel line kept


def test_a_real_full_disk_undoes_the_write_counts_the_drop_and_keeps_going(
    small_disk: Callable[[str], Path],
) -> None:
    disk = small_disk("512k")
    spool = Spool(disk / "spool", 256 << 20)
    filler = fill(disk)  # full before the spool wrote a byte
    assert spool.append(batch(1, samples=2, lines=1)) is False
    dropped, reasons = spool.take_dropped() or ({}, [])
    assert dropped == {"samples": 2, "lines": 1, "events": 0} and reasons == ["disk_full"]
    filler.unlink()  # room again: used again
    for n in range(2, 4000):
        spool.append(batch(n, samples=4, lines=1 if n % 20 == 0 else 0))
    spool.close()
    reopened = Spool(disk / "spool", 256 << 20)
    got = replay(reopened)  # nothing torn: every frame whole
    assert [ln["seq"] for b in got for ln in b["lines"]] == [n * 100 for n in range(20, 4000, 20)]


def test_thinning_in_place_cut_short_loses_no_line(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    for n in range(50):
        spool.append(batch(n, samples=6, lines=1))
    spool.close()
    (seg,) = tmp_path.glob("*.seg")
    payloads = [p for _, _, p in iter_frames(seg.read_bytes())]
    frames, lost = thin(payloads, 2)
    assert lost["samples"] == 300 and len(frames) == 50
    with open(seg, "r+b") as f:  # kill -9 after 20 of the in-place writes
        offset = 0
        for chunk in frames[:20]:
            f.seek(offset)
            f.write(chunk)
            offset += len(chunk)
    got = replay(Spool(tmp_path, 1 << 20))
    seqs = sorted({ln["seq"] for b in got for ln in b["lines"]})
    assert seqs == [n * 100 for n in range(50)]  # some twice (the collector drops repeats)


def test_thinning_without_room_for_a_copy_compacts_in_place(tmp_path: Path) -> None:
    disk = Disk(tmp_path, free=300 * 1024)
    spool = Spool(tmp_path, 1 << 22, room=disk)
    replaced = []
    real = diskio.overwrite
    diskio.overwrite = lambda path, chunks: (replaced.append(path), real(path, chunks))
    try:
        for n in range(400):  # 2.5x the disk's room in all, lines alone half of it
            spool.append(batch(n, samples=20, lines=1))
            assert disk.used() <= disk.free
    finally:
        diskio.overwrite = real
    assert replaced and not list(tmp_path.glob("*.tmp"))
    got = replay(spool)
    assert [ln["seq"] for b in got for ln in b["lines"]] == [k * 100 for k in range(400)]
