"""The interfaces every agent data source implements (kmsg, proc, gpu, vllm, journal, ...)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol


class SampleSource(Protocol):
    name: str  # also the sample section key, e.g. "gpu", "vllm"

    # called once per sample tick; raise -> one source_error event, then retried quietly
    def read(self) -> Any: ...


class LineSource(Protocol):
    name: str

    # blocking; emits line dicts {ts, source, priority, text, fields?, kseq?, facility?} (no seq)
    # (an emitted dict with a "kind" key is an agent event instead: {"kind", "data"}, see event())
    def run(self, emit: Callable[[dict[str, Any]], None], stop: threading.Event) -> None: ...


class PartialRead(Exception):
    """Raised by ``SampleSource.read`` to deliver ``value`` while reporting ``error`` once.

    For a source that reads several files and lost only some of them (e.g. /proc/pressure/io).
    """

    def __init__(self, value: Any, error: str) -> None:
        super().__init__(error)
        self.value = value


def event(kind: str, **data: Any) -> dict[str, Any]:
    """An agent event as a LineSource may pass to ``emit``: any dict with a ``kind`` key is one."""
    return {"kind": kind, "data": data}
