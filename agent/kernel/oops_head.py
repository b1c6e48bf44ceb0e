"""The first line of a kernel oops report, which the kernel prints before its die line.

A page fault the kernel cannot handle opens its report with "BUG: kernel NULL pointer
dereference, address: ..." or "BUG: unable to handle page fault for address: ..." (x86 since
5.1; before: "BUG: unable to handle kernel NULL pointer dereference at ...", "... kernel paging
request at ..."), arm64 and arm with "Unable to handle kernel <what> at virtual address ...",
a failed ``BUG()`` assertion with "kernel BUG at <file>:<line>!" (2.6: "<bad filename>" where
the file's name was not readable), and an x86 kernel stack overflow with "BUG: <stack> stack
guard page was hit at ..." (older kernels name no stack); the die line ("Oops: 0000 [#1] ...",
"invalid opcode: 0000 [#1]", 2.6's "invalid operand: 0000 [#1]", "[Oops: ]stack guard page:
0000 [#1]", "Internal error: Oops: ... [#1]") follows a few records
later (x86: 3-5, arm64: 7-15 with the abort decoding). The head line is the event
(``oops``/``oops``, ``oops``/``bug``), so a paste that quotes only the first lines, or a
capture cut before the die line, still names the oops; the die line after it restates it
(``collector.kernel.reports`` folds it). Other ``BUG:`` lines ("BUG: scheduling while atomic",
"BUG: Bad page state", "BUG: sleeping function called from invalid context", KASAN's) are
warnings the kernel survives: no oops, and no event here; "BUG: soft lockup" and "BUG:
workqueue lockup" are lockups (``generic``).
"""

from __future__ import annotations

import re

# Substrings one of which every head line holds (the classifier's first, cheap test).
NEEDLES = (
    "BUG: kernel NULL pointer",
    "BUG: unable to handle ",
    "kernel BUG at ",
    "Unable to handle kernel ",
    "stack guard page was hit at ",
)
_HEAD = re.compile(
    r"(?<![\w-])(?:BUG: (?:kernel NULL pointer dereference|unable to handle (?:kernel|page fault))"
    r"|(?P<bug>kernel BUG at )(?:[\w./+-]{1,200}|<bad filename>):\d{1,6}!"
    r"|Unable to handle kernel "
    r"|BUG: (?:[\w#]{1,24} )?stack guard page was hit at )"
)
# The codes a head line and the die line restating it have (what the die line's words say).
HEAD_CODES = frozenset({"oops", "bug"})
DIE_CODES = frozenset({"oops", "bug", "gpf"})
_DIE_MARK = "[#"


def oops_head(text: str) -> tuple[str, str] | None:
    """(code, the head's words to the end of the line) of a head line, else None."""
    m = _HEAD.search(text)
    if m is None:
        return None
    return ("bug" if m.group("bug") else "oops"), text[m.start() :].strip()[:240]


def opens_oops_report(kind: str, code: str | None, detail: str | None) -> bool:
    """An ``oops`` event read off a head line (no die line's ``[#n]``)."""
    return kind == "oops" and code in HEAD_CODES and _DIE_MARK not in (detail or "")


def is_die_line(kind: str, code: str | None, detail: str | None) -> bool:
    """An ``oops`` event read off a die line: what may restate the head line before it."""
    return kind == "oops" and code in DIE_CODES and _DIE_MARK in (detail or "")
