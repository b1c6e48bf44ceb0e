"""The Jinja2 environment of the pages, built once per app with its filters."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from fastapi.templating import Jinja2Templates

import templates as templates_pkg
from collector.retention.usage import human_bytes

TEMPLATES_DIR = Path(templates_pkg.__file__).resolve().parent


def fmt_gib(value: int | None) -> str:
    return "–" if value is None else f"{value / 2**30:.1f} GiB"


def fmt_ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "never"
    delta = max(0.0, now - ts)
    if delta < 120:
        return f"{delta:.0f} s ago"
    if delta < 7200:
        return f"{delta / 60:.0f} min ago"
    return f"{delta / 3600:.1f} h ago"


def fmt_clock(ts: float | None) -> str:
    """UTC, as the pages show times until their script switches them to the reader's choice."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) if ts else "–"


def make_templates(clock: Callable[[], float]) -> Jinja2Templates:
    """The pages' templates; ``clock`` (epoch seconds) is what "N s ago" counts from."""
    templates = Jinja2Templates(directory=TEMPLATES_DIR)
    templates.env.filters["gib"] = fmt_gib
    templates.env.filters["ago"] = lambda ts: fmt_ago(ts, clock())
    templates.env.filters["clock"] = fmt_clock
    templates.env.filters["size"] = human_bytes
    return templates
