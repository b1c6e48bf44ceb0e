"""An oops through the real ingest API (SQLite and PostgreSQL), its records cut at every point:
its first line ("BUG: kernel NULL pointer dereference, ...") is the one alert, at once, so a
host that froze before the die line left it still names the oops; the die line a few records
later ("Oops: 0000 [#1] ...") restates it: no second event, count or alert; the RIP line gives
the event its module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from collector.kernel.records import read_kernel_log
from collector.models import Host, KernelEventRow
from tests.collector.conftest import Collector
from tests.collector.freeze_support import factory
from tests.collector.kernel.test_restated import (
    alerts,
    cuts,
    hooked_collector,
    occurrences,
    oopses,
    real_lines,
    records,
    send,
)

# NVIDIA/open-gpu-kernel-modules#1110: the BUG line and the trimmed RIP line, all it quotes
PR_1110 = records(real_lines("bug-line-only-pastes-uvm-hmm-unregister-and-wifi-page-fault.txt"))
# mbilker/vgpu_unlock-rs#7: BUG, two #PF lines, the page table line, the die line, CPU,
# Hardware name and RIP lines (5.15, dmesg times: the die line 63 us after the BUG line)
VGPU = records(real_lines("vgpu-unlock-7-oops-core.txt"))[:8]
ONE_OOPS = [("oops", "oops", "", "fatal", True)]


@pytest.fixture
def eager(db_url: str) -> Iterator[Collector]:
    """Webhook targets with no alert cooldown: only the fold keeps a restatement quiet."""
    yield from hooked_collector(db_url, kernel_alert_cooldown_s=0)


def modules(c: Collector, host: str) -> list[str | None]:
    with factory(c)() as s:
        host_id = s.scalars(select(Host.id).where(Host.name == host)).one()
        return list(
            s.scalars(select(KernelEventRow.module).where(KernelEventRow.host_id == host_id))
        )


def test_a_bug_line_quoted_alone_alerts_in_its_module(eager: Collector) -> None:
    bug, rip = PR_1110[:2]
    assert bug[0].startswith("BUG: kernel NULL pointer dereference")
    for cut, batches in cuts([bug, rip]):
        send(eager, cut, batches)
        assert alerts(eager, cut) == ONE_OOPS, cut
        assert modules(eager, cut) == ["nvidia_uvm"], cut


def test_a_bug_line_and_its_die_line_are_one_alert(eager: Collector) -> None:
    assert VGPU[0][0].startswith("BUG: ") and VGPU[4][0] == "Oops: 0000 [#1] SMP PTI"
    for cut, batches in cuts(VGPU):
        send(eager, cut, batches)
        assert alerts(eager, cut) == ONE_OOPS, cut
        assert oopses(eager, cut) == [("oops", "oops", "fatal")], cut
        assert occurrences(eager, cut) == [("oops", "oops", "", 1, "fatal")], cut


def test_a_die_line_whose_bug_line_was_lost_alerts(eager: Collector) -> None:
    send(eager, "die", [VGPU[4:]])
    assert alerts(eager, "die") == ONE_OOPS


def test_a_die_line_seconds_after_a_bug_line_is_another_oops(eager: Collector) -> None:
    """Constructed timing around real lines: the die line as the next record, but five
    seconds after the BUG line, is no restatement of it: two events of one occurrence."""
    bug, die = VGPU[0], VGPU[4]
    later = (die[0], bug[1] + 5 * 10**6)
    for cut, batches in cuts([bug, later]):
        send(eager, cut, batches)
        assert oopses(eager, cut) == [("oops", "oops", "fatal")] * 2, cut
        assert occurrences(eager, cut) == [("oops", "oops", "", 2, "fatal")], cut


# Constructed from the kernel's formats (no public capture shows it): two CPUs hit BUG() at
# once; report_bug() prints each "kernel BUG at" before die() serializes the die lines, so both
# head lines come before either die line. Two reports: two events, not three.
TWO_CPUS = [
    ("kernel BUG at drivers/gpu/drm/drm_gem.c:120!", 100_000_100),
    ("kernel BUG at mm/slub.c:4052!", 100_000_150),
    ("invalid opcode: 0000 [#1] PREEMPT SMP NOPTI", 100_000_200),
    (
        "CPU: 3 PID: 4121 Comm: python3 Tainted: P           OE      6.8.0-45-generic #45",
        100_000_210,
    ),
    ("RIP: 0010:drm_gem_object_free+0x10/0x20 [drm]", 100_000_220),
    ("invalid opcode: 0000 [#2] PREEMPT SMP NOPTI", 100_000_300),
    (
        "CPU: 7 PID: 977 Comm: kworker/7:1 Tainted: P      D    OE      6.8.0-45-generic #45",
        100_000_310,
    ),
    ("RIP: 0010:kfree+0x10/0x20", 100_000_320),
]


def test_two_cpus_head_lines_before_their_die_lines_are_two_events_whole_file() -> None:
    lines = [f"[  {usec // 10**6}.{usec % 10**6:06d}] {text}" for text, usec in TWO_CPUS]
    found = [(f.event.kind, f.event.code) for f in read_kernel_log(lines)]
    assert found == [("oops", "bug"), ("oops", "bug")]


def test_two_cpus_head_lines_before_their_die_lines_are_two_events_live(eager: Collector) -> None:
    for cut, batches in cuts(TWO_CPUS):
        send(eager, cut, batches)
        assert oopses(eager, cut) == [("oops", "bug", "fatal")] * 2, cut
        assert occurrences(eager, cut) == [("oops", "bug", "", 2, "fatal")], cut
