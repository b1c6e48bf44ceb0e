"""A record a paste or a terminal wrapped (its space at the cut lost): the bare line after it
goes on with it, and the two read whole say what neither part says on its own."""

from __future__ import annotations

from collector.vllm import log_formats as fmt
from collector.vllm.log_config import SETTINGS_LINE, WRAPPED_CONFIG
from collector.vllm.log_lines import VllmLine


def rejoined(last: str, parsed: VllmLine) -> tuple[bool, str] | None:
    """The last record's message read whole with this line as its rest: ``(True, whole)`` for a
    settings line's value or name cut in two, ``(False, whole)`` for a plan figure
    (``WRAPPABLE``) that neither part reads on its own; None where the line is no such rest (a
    record of its own: a level or a process tag)."""
    if parsed.level or parsed.proc:
        return None
    joined = last + parsed.msg
    if SETTINGS_LINE.search(last) and WRAPPED_CONFIG.match(parsed.msg):
        return True, joined
    split = last + "\n" + parsed.msg
    for whole in (joined, f"{last} {parsed.msg}"):
        if any(p.search(whole) and not p.search(split) for p in fmt.WRAPPABLE):
            return False, whole
    return None
