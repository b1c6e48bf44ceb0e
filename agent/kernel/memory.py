"""Memory exhaustion in the kernel's words: OOM kills (every wording since 2.6: the invoker, the
killed process, a memory cgroup's, nothing left to kill) and allocation failures and stalls
(page, vmalloc, CMA)."""

from __future__ import annotations

import re

from agent.kernel.event import KernelEvent, make_event

# "Out of memory: Killed process 4121 (python3)", "Killed process 123, UID 48, (httpd)",
# older kernels: "Out of memory: Kill process 456 (python) score 50 or sacrifice child"
_OOM_KILLED = re.compile(r"Kill(?:ed)? process (?P<pid>\d+)(?:, UID \d+,)? \((?P<comm>[^)]*)\)")
# The invoker's name is up to 15 characters and may hold spaces ("GC Thread#9"): the whole of
# a message that starts with it; behind a prefix left on the line (a quote's "> ", a page's
# "- "), the word before the verb.
_OOM_INVOKED = re.compile(
    r"^(?![^\w\s]{1,3} )(?P<comm>[^\s\[\]](?:[^\[\]:]|:(?! )){0,14}?) invoked oom-killer:"
    r"|(?:^|\s)(?P<word>\S+) invoked oom-killer:"
)
# "python3: page allocation failure: order:4, mode:...", 2.6: "swapper: page allocation failure.
# order:3, mode:0x4020"; vmalloc: 5.x+ "vmalloc error: size 0, ...", 3.x-5.x "vmalloc: allocation
# failure: 0 bytes" (with or without "<comm>: " before it), "vmalloc: allocation failure, allocated"
_ALLOC_FAIL = re.compile(
    r"^(?:(?P<comm>.+?): )??(?:page allocation failure[:.] order:(?P<order>\d+)"
    r"|vmalloc(?: error:|: allocation failure[:,]))"
)
_ALLOC_STALL = re.compile(r"page allocation stalls for (?P<ms>\d+)ms")
# Contiguous memory (CMA): 4.x "cma: cma_alloc: alloc failed, req-size: 2040 pages, ret: -12",
# 5.x+ "cma_alloc: linux,cma: alloc failed, ...", 6.12+ "__cma_alloc: reserved: alloc failed, ..."
_CMA_FAIL = re.compile(
    r"cma_alloc(?:\(\))?: (?:[\w,.@-]+: )?alloc failed, req-size: (?P<pages>\d+)"
)


def classify_oom(text: str) -> KernelEvent | None:
    """The OOM killer's event in one message, or None."""
    if "Killed process" in text or "Kill process" in text:
        m = _OOM_KILLED.search(text)
        # the memory cgroup's 3.x-4.x wording: "Memory cgroup out of memory: Kill process 42 (x)"
        if m and ("Out of memory" in text or "out of memory" in text or "Killed process" in text):
            cgroup = "Memory cgroup" in text
            return make_event(
                "oom_kill",
                code="cgroup" if cgroup else "system",
                pid=int(m.group("pid")),
                process=m.group("comm"),
                meaning="process killed by the "
                + ("memory cgroup's OOM killer" if cgroup else "OOM killer"),
                detail=text.strip(),
            )
    if "oom-killer" in text:
        m = _OOM_INVOKED.search(text)
        if m:
            return make_event(
                "oom_kill",
                code="invoked",
                process=m.group("comm") or m.group("word"),
                meaning="OOM killer invoked",
                detail=text.strip(),
            )
    if "Out of memory and no killable processes" in text:
        # out_of_memory() prints it for a memory cgroup too, whose charge then fails while the
        # host goes on (a container's flood of them); for the whole system (4.19+) the panic
        # "System is deadlocked on memory" follows, its own fatal event (before 4.19 it was
        # the panic's own words, and that panic line is the event)
        return make_event(
            "oom_kill",
            code="nothing_to_kill",
            meaning="out of memory, nothing to kill",
            detail=text.strip(),
        )
    return None


def classify_alloc(text: str) -> KernelEvent | None:
    """An allocation failure or stall in one message, or None."""
    m = _ALLOC_FAIL.search(text.strip())
    if m:
        order = m.group("order")
        return make_event(
            "alloc_failure",
            code="page" if order is not None else "vmalloc",
            process=m.group("comm"),
            meaning=f"page allocation failure (order {order})"
            if order is not None
            else "vmalloc failure",
            detail=text.strip(),
        )
    m = _CMA_FAIL.search(text)
    if m:
        return make_event(
            "alloc_failure",
            code="cma",
            meaning=f"contiguous memory (CMA) allocation of {m.group('pages')} pages failed",
            detail=text.strip(),
        )
    m = _ALLOC_STALL.search(text)
    if m:
        return make_event(
            "alloc_failure",
            code="stall",
            meaning=f"page allocation stalled for {m.group('ms')} ms",
            detail=text.strip(),
        )
    return None
