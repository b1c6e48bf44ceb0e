"""arm64's fatal asynchronous SError: its "SError Interrupt on CPU<n>, code 0x<ESR> -- <class>"
line is the event (``oops``/``serror``, fatal, reboot), in every form the kernel printed since
4.14 (``%08x``, then ``%016lx`` since 5.19) and behind any prefix; the panic after it is still a
panic on its own (``collector.kernel.reports`` folds it); other SError lines are no event."""

from __future__ import annotations

import pytest

from agent.kernel.classify import classify_kernel_line
from agent.kernel.generic import restates_serror
from tests.support.timing import fastest


@pytest.mark.parametrize(
    ("line", "cpu", "esr"),
    [
        # tobetter/linux#36 (5.18): the 8-digit ESR
        ("[ 1569.710500] SError Interrupt on CPU3, code 0xbe000011 -- SError", "3", "be000011"),
        # qualcomm-linux/kernel#541 (7.0): the 16-digit ESR
        (
            "[   18.348119] SError Interrupt on CPU5, code 0x00000000be000000 -- SError",
            "5",
            "be000000",
        ),
        # rick-heig/nvme_csd#9: a script's output before it on the console line
        (
            "    Set NVMe controll[   81.138049] SError Interrupt on CPU3, code 0x00000000bf000000"
            " -- SError",
            "3",
            "bf000000",
        ),
        # lore (Jetson TX1, 5.1): as a review quotes it
        (">  SError Interrupt on CPU0, code 0xbf000002 -- SError", "0", "bf000002"),
    ],
)
def test_the_fatal_serror_line_is_the_oops_event(line: str, cpu: str, esr: str) -> None:
    event = classify_kernel_line(line)
    assert event is not None
    assert (event.kind, event.code, event.severity, event.action) == (
        "oops",
        "serror",
        "fatal",
        "reboot",
    )
    assert f"(CPU {cpu}, ESR 0x{esr})" in (event.meaning or "")
    assert not restates_serror(event)


def test_an_serror_panic_alone_is_still_a_panic() -> None:
    # agherzan/meta-raspberrypi#1410: the panic whose SError line the paste left out
    event = classify_kernel_line(
        "[    1.250245] Kernel panic - not syncing: Asynchronous SError Interrupt"
    )
    assert event is not None
    assert (event.kind, event.code, event.severity, event.action) == (
        "oops",
        "panic",
        "fatal",
        "reboot",
    )
    assert restates_serror(event)
    other = classify_kernel_line("Kernel panic - not syncing: Attempted to kill init!")
    assert other is not None and not restates_serror(other)  # constructed (kernel/exit.c)


@pytest.mark.parametrize(
    "line",
    [
        # NVIDIA's downstream (L4T) kernel's own SError line (forums.developer.nvidia.com)
        "[ 3641.615008] CPU0: SError detected, daif=1c0, spsr=0x200000c5, mpidr=80000100, "
        "esr=bf000002",
        # the same kernel's debugging ported upstream (lkml.iu.edu, Jetson TX2)
        "[ 2.955499] CPU0: SError: mpidr=0x80000100, esr=0xbf40c000",
        # a fatal SError's call trace (qualcomm-linux/kernel#297, lore Jetson TX1)
        "[   16.816693]  arm64_serror_panic+0x70/0x80",
        "[   16.816700]  do_serror+0x58/0x74",
        ">   arm64_serror_panic+0x74/0x80",
        # constructed from printk formats: Pensando's vendor kernel turning a decode SError
        # into SIGBUS or ignoring it, and 4.x bad_mode(), whose die line is the event
        "python3[1234]: serror converted to bus error",
        "ignoring serror decode-error in kernel mode",
        "Bad mode in Error handler detected, code 0xbf000000 -- SError",
        # constructed: the words without the kernel's code field
        "SError Interrupt on CPU handling: see Documentation/arm64/",
    ],
)
def test_other_serror_lines_are_no_event(line: str) -> None:
    assert classify_kernel_line(line) is None


def test_a_long_line_of_serror_words_classifies_in_linear_time() -> None:
    # constructed: many "SError Interrupt on CPU<digits>, code 0x<hex>" with no " -- " after
    # them, against a line as long without the words
    def cost(body: str) -> float:
        return fastest(lambda: classify_kernel_line(body))

    length = 65_536
    unit = "SError Interrupt on CPU1234, code 0x" + "f" * 16
    assert cost((unit * length)[:length]) < 50 * cost(("x" * length)[:length])
