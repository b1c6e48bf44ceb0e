"""Reads every SampleSource once per tick and queues one sample; a failing source degrades."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from agent.outbox import Outbox
from agent.sources.base import PartialRead, SampleSource

log = logging.getLogger(__name__)


class Sampler:
    """A sample needs ``mem``; other sections are optional and absent while their source fails."""

    def __init__(
        self,
        sources: Sequence[SampleSource],
        outbox: Outbox,
        *,
        interval: float = 1.0,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sources = list(sources)
        self.outbox = outbox
        self.interval = interval
        self._wall = wall
        self._mono = mono
        self._failing: set[str] = set()  # sources whose error was already reported

    def sample_once(self) -> dict[str, Any] | None:
        sample: dict[str, Any] = {"ts": round(self._wall(), 6), "burst": False}
        for source in self.sources:
            try:
                sample[source.name] = source.read()
                self._failing.discard(source.name)
            except PartialRead as exc:
                sample[source.name] = exc.value
                self._report(source.name, exc)
            except Exception as exc:
                self._report(source.name, exc)
        if sample.get("mem") is None:
            return None  # mem is required on the wire: no sample rather than a rejected batch
        self.outbox.put_sample(sample)
        return sample

    def _report(self, name: str, exc: BaseException) -> None:
        if name in self._failing:
            return
        self._failing.add(name)
        log.warning("source %s failed: %s", name, exc)
        error = f"{type(exc).__name__}: {exc}"
        self.outbox.put_event(
            {
                "ts": round(self._wall(), 6),
                "kind": "source_error",
                "data": {"source": name, "error": error},
            }
        )

    def run(self, stop: threading.Event) -> None:
        """Tick at a fixed rate; a slow tick is not made up for (no burst of stale samples)."""
        next_tick = self._mono()
        while not stop.is_set():
            self.sample_once()
            next_tick += self.interval
            now = self._mono()
            if next_tick < now:
                next_tick = now + self.interval
            stop.wait(next_tick - now)
