"""The kernel's own freeze precursors and crashes: soft/hard/workqueue/spinlock lockups, hung
tasks, RCU stalls, OOM kills and allocation failures (``memory``), and oops / BUG / general
protection fault / arm64 SError / panic as one kind, ``oops`` (a fatal machine check's panic:
``hardware``).

An oops prints many lines; the event is its head line where it has one ("BUG: kernel NULL
pointer dereference, ...", "kernel BUG at ...!", "Unable to handle kernel ...": ``oops_head``),
else the die line (``Oops: 0000 [#1] SMP``, ``general protection fault ...: 0000 [#1]``,
``Internal error: Oops: ... [#1]``), printed once per oops (after a head line it restates it),
and a panic that is not the consequence of one (nor of a fatal firmware-reported hardware
error, which ``ghes`` counts). The module an oops happened in is on its ``RIP:`` (x86) or
``pc :`` (arm64) line: ``oops_site`` reads it.

An arm64 asynchronous external abort the CPU cannot contain is reported by
``arm64_serror_panic`` (``arch/arm64/kernel/traps.c``; ``do_serror`` itself in 4.14-4.15) as
"SError Interrupt on CPU<n>, code 0x<ESR> -- <class>" (ESR ``%08x``, ``%016lx`` since 5.19),
its registers, then "Kernel panic - not syncing: Asynchronous SError Interrupt": the SError
line is the event (``oops``/``serror``), so a capture cut after it still names the fault. The
panic restates it (``collector.kernel.reports`` folds it); alone, it is a panic. The kernel
prints no line for the SErrors it survives (RAS corrected or restartable ones), and vendor
kernels' own SError lines ("CPU0: SError detected, ...") are no event.
"""

from __future__ import annotations

import re

from agent.kernel.event import KernelEvent, make_event
from agent.kernel.memory import classify_alloc, classify_oom
from agent.kernel.oops_head import NEEDLES as HEAD_NEEDLES
from agent.kernel.oops_head import oops_head

_SOFT_LOCKUP = re.compile(
    r"soft lockup - CPU#(?P<cpu>\d+) stuck for (?P<secs>\d+)s!\s*\[(?P<comm>.*):(?P<pid>\d+)\]"
)
# "Watchdog detected hard LOCKUP on cpu 3" (x86 perf NMI, arm64 buddy/SDEI), powerpc's own
# watchdog: "Watchdog CPU:59 Hard LOCKUP" (4.15), "CPU 12 self-detected hard LOCKUP @ ..."
_HARD_LOCKUP = re.compile(
    r"hard LOCKUP on cpu (?P<cpu>\d+)|\bCPU[: ]?(?P<other>\d+):? (?:self-detected )?[Hh]ard LOCKUP"
)
_WQ_LOCKUP = re.compile(r"BUG: workqueue lockup - pool .*stuck for (?P<secs>\d+)s")
# CONFIG_DEBUG_SPINLOCK's spin_dump() before 4.11: a CPU that spun about a second on a lock it
# cannot take ("BUG: spinlock lockup suspected on CPU#0, ksdioirqd/mmc0/73", 3.4: "BUG:
# spinlock lockup on CPU#0, swapper/0"): <comm>/<pid>; its other words ("bad magic", "wrong
# owner", "already unlocked") are misuse the kernel survives, no event
_SPIN_LOCKUP = re.compile(
    r"BUG: spinlock lockup (?:suspected )?on CPU#(?P<cpu>\d+), (?P<comm>\S+)/(?P<pid>\d+)"
)
_HUNG_TASK = re.compile(r"\btask (?P<comm>.+):(?P<pid>\d+) blocked for more than (?P<secs>\d+)")
_RCU_STALL = re.compile(r"\brcu_\w+ (?:self-)?detected (?:expedited )?stalls?\b")
# The die line: "<what>: <error code> [#<n>]", where <what> names a fault: "Oops", "general
# protection fault", "invalid opcode" (2.6: "invalid operand"), "divide error", "stack guard page"
_DIE_WORDS = ("Oops", "fault", "opcode", "operand", "stack guard page")
_DIE = re.compile(r"(?P<what>[A-Za-z][^\[]*?):? (?:[0-9a-fA-F]{4,16} )?\[#(?P<n>\d+)\]")
_PANIC = re.compile(r"Kernel panic - not syncing: ?(?P<why>.*)")
# x86 mce_panic()'s words: "Fatal machine check", "Fatal local machine check", "Machine check from
# unknown source", mce_timed_out()'s "Timeout: Not all CPUs entered broadcast exception handler"
# (its other timeouts name the machine check), ...: the CPU's own uncontained error, like a fatal
# GHES record (``ghes``), so the same code, unattributed to any module, and the same advice; the
# "mce: [Hardware Error]:" lines before it are no event. powerpc dies of one instead: "Oops:
# Machine check, sig: 7 [#1]" (die("Machine check", ...)), the same code on its die line.
_MACHINE_CHECK = re.compile(r"\b[Mm]achine check\b|\bbroadcast exception handler\b")
MACHINE_CHECK_MEANING = "fatal machine check: the CPU reported an error it could not contain"
SERROR_NEEDLE = "SError Interrupt on CPU"
_SERROR = re.compile(
    r"SError Interrupt on CPU(?P<cpu>\d{1,5}), code 0x(?P<esr>[0-9a-fA-F]{1,16}) -- "
)
# what nmi_panic() says right after the SError line (4.14-4.15: panic())
SERROR_PANIC = "Asynchronous SError Interrupt"
# "RIP: 0010:nvidia_vma_access+0x1b/0x350 [nvidia]", old "RIP: 0010:[<ff..>]  [<ff..>] f+0x16/0x20",
# arm64 "pc : _nv012345rm+0x1c/0x60 [nvidia]"; newer kernels add a build id: "[nvidia 150ac0...]";
# a bug report's trimmed quote drops the code segment: "RIP: uvm_hmm_unregister_gpu+0x51/0x3a0".
# x86 before 4.15 names the site on the line after its page fault's head too, before the die
# line ("IP: [<ffffffffc01cc246>] amdgpu_bo_list_set+0x196/0x3d0 [amdgpu]", 4.13-4.14: "IP:
# __kmalloc+0xc0/0x1e0"), and 32-bit x86 ends its report with "EIP: [<f8e40765>] f+0x3/0x5 [wl]"
_SITE = re.compile(
    r"(?:\bRIP: (?:[0-9a-f]{4}:)?|\bE?IP: |\bpc : )(?:\[<[0-9a-f]+>\]\s+){0,2}"
    r"(?P<func>[\w.$]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?:\s+\[(?P<module>\w+)(?: [0-9a-f]+)?\])?"
)
# A stack frame that names a module: " uvm_release+0x151/0x160 [nvidia_uvm]"
_FRAME_MODULE = re.compile(r"\+0x[0-9a-f]+/0x[0-9a-f]+\s+\[(?P<module>\w+)(?: [0-9a-f]+)?\]")


def _oops_flavour(what: str) -> str:
    lowered = what.lower()
    if "general protection" in lowered:
        return "gpf"
    if "bug" in lowered or "invalid opcode" in lowered or "invalid operand" in lowered:
        return "bug"
    return "oops"


def _machine_check(meaning: str, text: str) -> KernelEvent:
    """A die line or panic a machine check caused: the hardware's fault, not the kernel's."""
    return make_event(
        "oops", ("fatal", "inspect_hardware"), code="hardware", meaning=meaning, detail=text.strip()
    )


def _classify_oops(text: str) -> KernelEvent | None:
    if "[#" in text:
        m = _DIE.search(text)
        if m and (any(word in text for word in _DIE_WORDS) or "error" in text.lower()):
            if _MACHINE_CHECK.search(m.group("what")):
                return _machine_check(f"{MACHINE_CHECK_MEANING} (die #{m.group('n')})", text)
            flavour = _oops_flavour(m.group("what"))
            return make_event(
                "oops",
                code=flavour,
                meaning=OOPS_MEANINGS[flavour] + f" (die #{m.group('n')})",
                detail=text.strip(),
            )
    if "Kernel panic" in text:
        m = _PANIC.search(text)
        # "Fatal exception" follows a die line, "[GHES: ]Fatal hardware error[!]" a fatal GHES
        # record (``ghes``): each restates its report
        why = m.group("why") if m else ""
        if m and _MACHINE_CHECK.search(why):
            return _machine_check(f"{MACHINE_CHECK_MEANING}: {why.strip()}", text)
        if m and not why.startswith("Fatal exception") and "Fatal hardware error" not in why:
            return make_event(
                "oops",
                code="panic",
                meaning=f"{OOPS_MEANINGS['panic']}: {m.group('why').strip()}",
                detail=text.strip(),
            )
    return None


def _serror(text: str) -> KernelEvent | None:
    m = _SERROR.search(text)
    if m is None:
        return None
    esr = m.group("esr").lstrip("0") or "0"
    return make_event(
        "oops",
        code="serror",
        meaning=f"{OOPS_MEANINGS['serror']} (CPU {m.group('cpu')}, ESR 0x{esr})",
        detail=text.strip(),
    )


def _head(text: str) -> KernelEvent | None:
    head = oops_head(text)
    if head is None:
        return None
    code, words = head
    return make_event(
        "oops", code=code, meaning=f"{OOPS_MEANINGS[code]}: {words}", detail=text.strip()
    )


def restates_serror(event: KernelEvent) -> bool:
    """The panic ``arm64_serror_panic`` prints after its SError line."""
    return event.kind == "oops" and event.code == "panic" and SERROR_PANIC in (event.detail or "")


OOPS_MEANINGS = {
    "oops": "kernel oops: the kernel hit a fault it cannot handle",
    "bug": "kernel BUG: a kernel assertion failed",
    "gpf": "general protection fault in the kernel",
    "panic": "kernel panic: the kernel stopped",
    "serror": "arm64 SError: an asynchronous external abort the kernel cannot survive",
}


def oops_site(text: str) -> tuple[str, str | None] | None:
    """(function, module or None) of a ``RIP:``/``IP:``/``pc :`` line, else None."""
    if "IP: " not in text and "pc : " not in text:
        return None
    m = _SITE.search(text)
    return (m.group("func"), m.group("module")) if m else None


def frame_module(text: str) -> str | None:
    """The module a stack-frame line names (``[nvidia_uvm]``), else None."""
    if "[" not in text:
        return None
    m = _FRAME_MODULE.search(text)
    return m.group("module") if m else None


def _lockup(text: str) -> KernelEvent | None:
    m = _SOFT_LOCKUP.search(text)
    if m:
        return make_event(
            "soft_lockup",
            code="soft",
            pid=int(m.group("pid")),
            process=m.group("comm"),
            meaning=f"CPU#{m.group('cpu')} stuck for {m.group('secs')}s (soft lockup)",
            detail=text.strip(),
        )
    m = _HARD_LOCKUP.search(text)
    if m:
        return make_event(
            "soft_lockup",
            ("fatal", "reboot"),
            code="hard",
            meaning=f"hard lockup on CPU {m.group('cpu') or m.group('other')}",
            detail=text.strip(),
        )
    m = _SPIN_LOCKUP.search(text)
    if m:
        return make_event(
            "soft_lockup",
            code="spinlock",
            pid=int(m.group("pid")),
            process=m.group("comm"),
            meaning=f"CPU#{m.group('cpu')} stuck spinning on a lock (spinlock lockup)",
            detail=text.strip(),
        )
    m = _WQ_LOCKUP.search(text)
    if m:
        return make_event(
            "soft_lockup",
            code="workqueue",
            meaning=f"workqueue lockup: a worker pool stuck for {m.group('secs')}s",
            detail=text.strip(),
        )
    return None


def classify_generic(text: str) -> KernelEvent | None:
    """The kernel's own event in one message, or None."""
    if ("[#" in text or "Kernel panic" in text) and "---[ end" not in text:
        event = _classify_oops(text)
        if event is not None:
            return event
    if SERROR_NEEDLE in text:
        return _serror(text)
    for needle in HEAD_NEEDLES:
        if needle in text:
            event = _head(text)
            if event is not None:
                return event
            break
    if "lockup" in text or "LOCKUP" in text:
        event = _lockup(text)
        if event is not None:
            return event
    if "blocked for more than" in text:
        m = _HUNG_TASK.search(text)
        if m:
            return make_event(
                "hung_task",
                pid=int(m.group("pid")),
                process=m.group("comm"),
                meaning=f"task blocked for more than {m.group('secs')} seconds",
                detail=text.strip(),
            )
    if "stall" in text:
        if _RCU_STALL.search(text):
            return make_event("rcu_stall", meaning="RCU stall detected", detail=text.strip())
        if "allocation stall" in text:
            return classify_alloc(text)
    if "process" in text or "oom-killer" in text or "Out of memory" in text:
        return classify_oom(text)
    if "allocation failure" in text or "vmalloc error" in text or "cma_alloc" in text:
        return classify_alloc(text)
    return None
