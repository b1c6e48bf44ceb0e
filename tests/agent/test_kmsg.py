import os
import queue
import select
import threading
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from agent.sources.kmsg import KmsgSource, parse_record, split_records, unescape

from .conftest import FIXTURES


def fixed_clock() -> dict[str, Any]:
    # wall - monotonic = 1_764_400_000: kernel usec 5_000_000 is wall 1_764_400_005
    return {"wall": lambda: 1_764_400_100.0, "mono": lambda: 100.0}


def dump_records() -> list[bytes]:
    records, pending = split_records((FIXTURES / "kmsg-dump.txt").read_bytes())
    return [*records, pending]


def test_parse_plain_record() -> None:
    line = parse_record(
        b"6,339,5140900,-;NET: Registered PF_INET6 protocol family\n", **fixed_clock()
    )
    assert line == {
        "ts": 1_764_400_005.1409,
        "source": "kmsg",
        "priority": 6,
        "facility": 0,
        "kseq": 339,
        "text": "NET: Registered PF_INET6 protocol family",
        "fields": {"_SOURCE_MONOTONIC_TIMESTAMP": "5140900"},
    }


def test_parse_continuation_caller_and_unknown_header_fields() -> None:
    rec = (
        b"4,343,7211402876,-,caller=T3849;NVRM: Xid (PCI:000f:01:00): 119, pid=3849\n"
        b" SUBSYSTEM=pci\n DEVICE=+pci:000f:01:00.0\n"
    )
    line = parse_record(rec, **fixed_clock())
    assert line is not None
    assert line["kseq"] == 343 and line["priority"] == 4
    assert line["text"] == "NVRM: Xid (PCI:000f:01:00): 119, pid=3849"
    assert line["fields"]["SUBSYSTEM"] == "pci"
    assert line["fields"]["DEVICE"] == "+pci:000f:01:00.0"
    assert line["fields"]["_CALLER"] == "T3849"
    more = parse_record(b"3,346,1,-,caller=C3,more=ignored,x;oom", **fixed_clock())
    assert more is not None and more["text"] == "oom" and more["fields"]["_CALLER"] == "C3"


def test_facility_level_split_and_escapes() -> None:
    line = parse_record(b"12,347,1,-;from userspace", **fixed_clock())
    assert line is not None and (line["facility"], line["priority"]) == (1, 4)
    assert unescape(rb"tab\x09and \x5c and caf\xc3\xa9") == "tab\tand \\ and café"
    # a printed NUL is kept as the kernel wrote it: no line carries a NUL character
    assert unescape(rb"nul \x00 here") == "nul \\x00 here"
    assert parse_record(b"garbage without header", **fixed_clock()) is None
    assert parse_record(b"x,1,2,-;bad prio", **fixed_clock()) is None


def test_fixture_dump_parses_in_order() -> None:
    lines = [parse_record(r, **fixed_clock()) for r in dump_records()]
    assert all(lines)
    kseqs = [ln["kseq"] for ln in lines if ln]
    assert kseqs == [0, 1, 2, *range(339, 348)]
    usb = next(ln for ln in lines if ln and ln["kseq"] == 340)
    assert usb["fields"]["DEVICE"] == "c189:1"
    tab = next(ln for ln in lines if ln and ln["kseq"] == 345)
    assert tab["text"] == "tab\tseparated and a backslash \\ done"


def test_split_records_keeps_last_record_pending() -> None:
    records, pending = split_records(b"6,1,0,-;a\n KEY=V\n6,2,0,-;b\n K2=")
    assert records == [b"6,1,0,-;a\n KEY=V"]
    assert pending == b"6,2,0,-;b\n K2="


def follow(path: Path) -> tuple["queue.Queue[dict[str, Any]]", threading.Event, threading.Thread]:
    out: queue.Queue[dict[str, Any]] = queue.Queue()
    stop = threading.Event()
    src = KmsgSource(path, poll_timeout=0.2, **fixed_clock())
    thread = threading.Thread(target=src.run, args=(out.put, stop), daemon=True)
    thread.start()
    return out, stop, thread


def take(out: "queue.Queue[dict[str, Any]]") -> dict[str, Any]:
    return out.get(timeout=10)  # guard only: records arrive as soon as they are written


def test_follow_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    path.write_bytes(b"6,10,1000,-;first\n")
    out, stop, thread = follow(path)
    try:
        assert take(out)["text"] == "first"
        for i in range(11, 16):
            with open(path, "ab") as f:
                f.write(b"6,%d,2000,-;line %d\n SUBSYSTEM=x\n" % (i, i))
            line = take(out)
            assert (line["kseq"], line["text"], line["fields"]["SUBSYSTEM"]) == (
                i,
                f"line {i}",
                "x",
            )
        with open(path, "ab") as f:  # a jump in kseq: the source says how many were lost
            f.write(b"6,20,3000,-;after gap\n")
        overrun = take(out)
        assert overrun == {
            "kind": "kmsg_overrun",
            "data": {"lost": 4, "reason": "gap", "after_kseq": 15},
        }
        assert take(out)["kseq"] == 20
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_follow_fifo(tmp_path: Path) -> None:
    path = tmp_path / "kmsg.fifo"
    os.mkfifo(path)
    out, stop, thread = follow(path)
    try:
        for writer in range(2):  # a writer closing does not end the stream
            with open(path, "wb", buffering=0) as f:
                for i in range(3):
                    kseq = writer * 3 + i
                    f.write(b"3,%d,5,-;fifo %d\n" % (kseq, kseq))
                    assert take(out)["kseq"] == kseq
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_real_dev_kmsg_if_readable() -> None:
    dev = Path("/dev/kmsg")
    try:
        fd = os.open(dev, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        pytest.skip(f"/dev/kmsg not readable here: {exc}")
    os.close(fd)
    out, stop, thread = follow(dev)
    try:
        first = take(out)
    finally:
        stop.set()
        thread.join(5)
    assert first["source"] == "kmsg" and isinstance(first["kseq"], int)


def script_reads(monkeypatch: pytest.MonkeyPatch, answers: list[bytes | Exception]) -> None:
    """/dev/kmsg's reads answer ``answers`` in turn (a record, or the error to raise)."""
    from agent.sources import kmsg as kmsg_module

    def read(fd: int, size: int) -> bytes:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(kmsg_module.os, "read", read)


def test_a_storm_is_read_ahead_and_an_overwritten_run_is_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/dev/kmsg: everything the kernel holds is read before any of it is parsed; a read that
    found records overwritten (EPIPE) marks the spot, and the next record says how many."""

    answers: list[bytes | Exception] = [
        b"6,1,1000,-;first\n",
        b"6,2,2000,-;second\n",
        BrokenPipeError(),
        b"6,9,9000,-;after the overwrite\n",
        BlockingIOError(),
    ]

    script_reads(monkeypatch, answers)
    source = KmsgSource(Path("/dev/null"), **fixed_clock())  # a character device
    ahead: deque[bytes | None] = deque()
    source._drain(0, ahead)
    assert list(ahead) == [b"6,1,1000,-;first\n", b"6,2,2000,-;second\n", None,
                           b"6,9,9000,-;after the overwrite\n"]  # fmt: skip
    assert not answers  # read until the kernel had no more
    monkeypatch.setattr(source, "_device_runs", lambda stop: iter([list(ahead)]))
    out: list[dict[str, Any]] = []
    source.run(out.append, threading.Event())
    assert [o.get("text") or o["data"] for o in out] == [
        "first",
        "second",
        {"lost": 6, "reason": "epipe", "after_kseq": 2},
        "after the overwrite",
    ]


def test_a_pump_reads_dev_kmsg_on_the_callers_thread_a_run_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``DevicePump``: the ring buffer drained into the read-ahead, then one run parsed per
    call; True while records are left; an overwrite (EPIPE) counted as the thread counts it."""
    from agent.sources import kmsg as kmsg_module

    monkeypatch.setattr(kmsg_module, "PARSE_RUN", 2)
    answers: list[bytes | Exception] = [
        b"6,1,1000,-;one\n",
        b"6,2,2000,-;two\n",
        BrokenPipeError(),
        b"6,5,5000,-;five\n",
        BlockingIOError(),  # the kernel has no more: the first call parses a run of two
        BlockingIOError(),
        b"6,6,6000,-;six\n",
        BlockingIOError(),
        BlockingIOError(),
    ]

    script_reads(monkeypatch, answers)
    source = KmsgSource(Path("/dev/null"), **fixed_clock())  # a character device
    out: list[dict[str, Any]] = []
    pump = source.pump(out.append)
    assert pump is not None
    try:
        pump.drain()  # read ahead (every record the kernel holds), nothing parsed yet
        assert out == []
        assert pump.pump() is True  # two parsed, the overwrite and "five" left
        assert [o["text"] for o in out] == ["one", "two"]
        assert pump.pump() is True  # "six" came meanwhile: read ahead, not yet parsed
        assert pump.pump() is False
        assert [o.get("text") or o["data"] for o in out] == [
            "one",
            "two",
            {"lost": 2, "reason": "epipe", "after_kseq": 2},
            "five",
            "six",
        ]
        assert not answers
    finally:
        pump.close()


def test_no_pump_for_a_file_it_follows_in_a_thread(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    path.write_bytes(b"6,10,1000,-;first\n")
    assert KmsgSource(path).pump(lambda record: None) is None


def test_a_pump_on_the_real_dev_kmsg_if_readable() -> None:
    dev = Path("/dev/kmsg")
    try:
        fd = os.open(dev, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        pytest.skip(f"/dev/kmsg not readable here: {exc}")
    os.close(fd)
    out: list[dict[str, Any]] = []
    pump = KmsgSource(dev).pump(out.append)
    assert pump is not None
    try:
        poller = select.poll()
        poller.register(pump.fileno(), select.POLLIN)
        assert poller.poll(10_000)  # the ring buffer holds this boot's records
        while pump.pump():
            pass
        kseqs = [o["kseq"] for o in out if "kseq" in o]
        assert kseqs and kseqs == sorted(kseqs) and out[0]["source"] == "kmsg"
    finally:
        pump.close()
