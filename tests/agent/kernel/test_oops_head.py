"""An oops's first line ("BUG: kernel NULL pointer dereference, ...", "kernel BUG at ...!",
arm64's "Unable to handle kernel ...") is the oops event, so a paste of the first lines alone
names it; the die line is still an oops on its own (``collector.kernel.reports`` folds it after
a head line); the kernel's other ``BUG:`` lines keep what they were."""

from __future__ import annotations

import pytest

from agent.kernel.classify import classify_kernel_line
from agent.kernel.generic import oops_site
from agent.kernel.oops_head import is_die_line, opens_oops_report
from collector.kernel.attribution import site_of
from collector.kernel.records import read_kernel_log
from tests.support.timing import fastest


@pytest.mark.parametrize(
    ("line", "code", "words"),
    [
        # NVIDIA/open-gpu-kernel-modules#1110: the first line, all the PR quotes of the oops
        (
            "BUG: kernel NULL pointer dereference, address: 00000000000000a8",
            "oops",
            "address: 00000000000000a8",
        ),
        # morrownr/rtl8852bu-20250826#18: a journal line with its host name
        (
            "cachyos-x8664 kernel: BUG: unable to handle page fault for address: 0000000000002420",
            "oops",
            "page fault for address",
        ),
        # gpud's pstore fixture (4.7): the old wording, a priority prefix
        (
            "<1>[  201.654822] BUG: unable to handle kernel NULL pointer dereference at  "
            "         (null)",
            "oops",
            "kernel NULL pointer dereference at",
        ),
        # a Fedora journal in a Russian locale (lib/list_debug.c's BUG_ON)
        (
            "июл 27 14:08:04 laptop kernel: kernel BUG at lib/list_debug.c:51!",
            "bug",
            "kernel BUG at lib/list_debug.c:51!",
        ),
        # geerlingguy/raspberry-pi-pcie-devices#123 (arm64)
        (
            "[   38.523167] Unable to handle kernel write to read-only memory at virtual address "
            "ffffffc0096dc3e1",
            "oops",
            "write to read-only memory",
        ),
        # LKML, a dm recursion on 6.1: an x86 kernel stack overflow
        (
            "BUG: TASK stack guard page was hit at 00000000736a261f "
            "(stack is 000000008d12c88d..00000000c8dd82d5)",
            "oops",
            "TASK stack guard page was hit",
        ),
        # LKML, a bpf trampoline recursion on 6.2: another CPU's IRQ stack
        (
            "[  867.843837] BUG: IRQ stack guard page was hit at 0000000099bd8228 "
            "(stack is 00000000b23e2bc4..000000006d95af35)",
            "oops",
            "IRQ stack guard page was hit",
        ),
        # LKML, 2.6.9: BUG() whose file name the kernel could not read
        ("kernel BUG at <bad filename>:25321!", "bug", "<bad filename>:25321!"),
    ],
)
def test_an_oops_head_line_is_the_oops_event(line: str, code: str, words: str) -> None:
    event = classify_kernel_line(line)
    assert event is not None
    assert (event.kind, event.code, event.severity, event.action) == (
        "oops",
        code,
        "fatal",
        "reboot",
    )
    assert words in (event.meaning or "")
    assert opens_oops_report(event.kind, event.code, event.detail)
    assert not is_die_line(event.kind, event.code, event.detail)


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("[  526.065316] Oops: 0000 [#1] SMP PTI", "oops"),  # mbilker/vgpu_unlock-rs#7
        ("июл 27 14:08:04 laptop kernel: invalid opcode: 0000 [#1] SMP PTI", "bug"),
        ("[   38.579212] Internal error: Oops: 9600004f [#1] PREEMPT SMP", "oops"),
        # LKML: a stack guard page hit's die line (6.1-6.11, then 6.12's "Oops: " wording)
        ("stack guard page: 0000 [#1] PREEMPT SMP", "oops"),
        ("Oops: stack guard page: 0000 [#1] PREEMPT SMP KASAN NOPTI", "oops"),
        # LKML, 2.6: BUG()'s ud2 trap before "invalid opcode"
        ("invalid operand: 0000 [#1]", "bug"),
    ],
)
def test_a_die_line_is_still_an_oops_of_its_own(line: str, code: str) -> None:
    event = classify_kernel_line(line)
    assert event is not None and (event.kind, event.code) == ("oops", code)
    assert is_die_line(event.kind, event.code, event.detail)
    assert not opens_oops_report(event.kind, event.code, event.detail)


@pytest.mark.parametrize(
    "line",
    [
        # constructed from the kernel's printk formats: BUG: warnings it goes on after
        "[  12.345678] BUG: scheduling while atomic: swapper/0/0/0x00010000",
        "BUG: Bad page state in process python3  pfn:1a2b3c",
        "BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580",
        "BUG: KASAN: use-after-free in uvm_va_block_free+0x20/0x40 [nvidia_uvm]",
        "BUG: using smp_processor_id() in preemptible [00000000] code: modprobe/1234",
        # constructed: the words without the kernel's file:line
        "a note: kernel BUG at some point in the past",
    ],
)
def test_bug_warnings_are_no_oops(line: str) -> None:
    assert classify_kernel_line(line) is None


def test_bug_lockups_keep_their_kind() -> None:
    # the corpus's arm64-oops-serror-panics.txt
    soft = classify_kernel_line(
        "[  904.173307] watchdog: BUG: soft lockup - CPU#1 stuck for 842s! [udevadm:94]"
    )
    assert soft is not None and (soft.kind, soft.code) == ("soft_lockup", "soft")
    # constructed from kernel/workqueue.c's format
    wq = classify_kernel_line(
        "BUG: workqueue lockup - pool cpus=3 node=0 flags=0x0 nice=0 stuck for 35s!"
    )
    assert wq is not None and (wq.kind, wq.code) == ("soft_lockup", "workqueue")


def test_a_trimmed_rip_line_names_its_site() -> None:
    # NVIDIA/open-gpu-kernel-modules#1110 quotes the RIP line without its code segment
    assert oops_site("RIP: uvm_hmm_unregister_gpu+0x51/0x3a0 [nvidia_uvm]") == (
        "uvm_hmm_unregister_gpu",
        "nvidia_uvm",
    )
    assert oops_site("RIP: 0010:nvidia_vma_access+0x1b/0x350 [nvidia]") == (
        "nvidia_vma_access",
        "nvidia",
    )


@pytest.mark.parametrize(
    ("line", "site"),
    [
        # ROCm/hip#15: 4.4's line after the head line, before the die line
        (
            "Mar 24 11:53:49 pandemonium kernel: [   19.067889] IP: [<ffffffffc01cc246>] "
            "amdgpu_bo_list_set+0x196/0x3d0 [amdgpu]",
            ("amdgpu_bo_list_set", "amdgpu"),
        ),
        # M-Bab/linux-kernel-amdgpu-binaries#9: 4.13's, with no address
        (
            "Jun 26 04:25:18 v01d kernel: [ 2105.794640] IP: __kmalloc+0xc0/0x1e0",
            ("__kmalloc", None),
        ),
        # abrt/satyr tests/kerneloopses/rhbz-865695-0: 32-bit x86's last line of the report
        (
            "EIP: [<f8e40765>] wdev_priv.part.8+0x3/0x5 [wl] SS:ESP 0068:f180dbf8",
            ("wdev_priv.part.8", "wl"),
        ),
    ],
)
def test_an_old_x86_ip_line_names_its_site(line: str, site: tuple[str, str | None]) -> None:
    assert oops_site(line) == site
    assert site_of(line) == (site if site[1] else None)


@pytest.mark.parametrize(
    "line",
    [
        # abrt/satyr tests/kerneloopses/arm-hung-task-oops: a vendor kernel's own register dump
        "PC:00000000  LR:00000000  SP:00000000  IP:00000000  FP:00000000",
        "EIP: 0060:[<f8e40765>] EFLAGS: 00210246 CPU: 1",
    ],
)
def test_register_lines_name_no_site(line: str) -> None:
    assert oops_site(line) is None


def test_a_capture_cut_after_the_die_line_keeps_the_ip_lines_module() -> None:
    # ROCm/hip#15 (the corpus's oops-various-nvidia-and-not.txt): head, IP, PGD, die line
    lines = [
        "Mar 24 11:53:49 pandemonium kernel: [   19.067885] BUG: unable to handle kernel NULL "
        "pointer dereference at 0000000000000010",
        "Mar 24 11:53:49 pandemonium kernel: [   19.067889] IP: [<ffffffffc01cc246>] "
        "amdgpu_bo_list_set+0x196/0x3d0 [amdgpu]",
        "Mar 24 11:53:49 pandemonium kernel: [   19.067905] PGD 0 ",
        "Mar 24 11:53:49 pandemonium kernel: [   19.067907] Oops: 0000 [#2] SMP ",
    ]
    (found,) = read_kernel_log(lines)
    assert (found.line_no, found.event.kind, found.event.module) == (1, "oops", "amdgpu")
    assert found.event.meaning is not None
    assert found.event.meaning.endswith("in [amdgpu] at amdgpu_bo_list_set")


def test_a_long_line_of_head_words_classifies_in_linear_time() -> None:
    # constructed: many "kernel BUG at <path>" with no ":<line>!" after them, against a line
    # as long without the words
    def cost(body: str) -> float:
        return fastest(lambda: classify_kernel_line(body))

    length = 65_536
    unit = "kernel BUG at " + "a/" * 60
    assert cost((unit * length)[:length]) < 50 * cost(("x" * length)[:length])
