"""The two shapes of agent data sources: sampled once per tick, or streaming lines."""

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

    # blocking; emits line dicts {"ts": float epoch, "source": "vllm"|"journal",
    # "priority": int|None, "text": str, "fields": dict|None}
    def run(self, emit: Callable[[dict[str, Any]], None], stop: threading.Event) -> None: ...
