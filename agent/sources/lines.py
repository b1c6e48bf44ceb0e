"""Helpers shared by the line sources: the line dict and a priority from a log level word."""

from __future__ import annotations

import re
from typing import Any

# vLLM/uvicorn/Python logging level words → syslog priorities.
_LEVELS = {"CRITICAL": 2, "ERROR": 3, "WARNING": 4, "WARN": 4, "INFO": 6, "DEBUG": 7}
_LEVEL_RE = re.compile(r"^(?:\(\S+ pid=\d+\) )?(CRITICAL|ERROR|WARNING|WARN|INFO|DEBUG)\b")


def level_priority(text: str) -> int | None:
    """``(EngineCore pid=1) ERROR 05-14 ...`` → 3; a line without a level word → None."""
    match = _LEVEL_RE.match(text)
    return _LEVELS[match.group(1)] if match else None


def make_line(
    ts: float,
    source: str,
    text: str,
    fields: dict[str, Any] | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    """A line dict as LineSource.emit expects it."""
    return {"ts": ts, "source": source, "priority": priority, "text": text, "fields": fields}
