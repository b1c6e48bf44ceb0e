"""Reads every SampleSource once per tick and queues one sample; a failing source degrades."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from agent.burst import BurstController
from agent.outbox import Outbox
from agent.sources.base import PartialRead, SampleSource

log = logging.getLogger(__name__)


class Sampler:
    """A sample needs ``mem``; other sections are optional and absent while their source fails.

    During a burst (``burst.active``) extra samples are taken at the burst rate between the
    regular ticks, reading only the ``fast`` sources (meminfo and pressure: cheap reads of
    procfs); every sample taken during a burst is marked ``burst: true``.
    """

    def __init__(
        self,
        sources: Sequence[SampleSource],
        outbox: Outbox,
        *,
        interval: float = 1.0,
        burst: BurstController | None = None,
        fast: frozenset[str] = frozenset({"mem", "psi"}),
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] | None = None,
        observer: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.sources = list(sources)
        self.fast_sources = [s for s in self.sources if s.name in fast]
        self.burst = burst
        self._kick = threading.Event()  # a burst began: stop sleeping out the 1 s tick
        self._sleep = sleep or self._kick_wait
        self.outbox = outbox
        self.interval = interval
        self._wall = wall
        self._mono = mono
        self._failing: set[str] = set()  # sources whose error was already reported
        self.observer = observer  # sees every queued sample (the guard)

    def kick(self) -> None:
        """Wake the sampler now (a burst just started)."""
        self._kick.set()

    def sample_once(self, *, fast_only: bool = False) -> dict[str, Any] | None:
        sample: dict[str, Any] = {"ts": round(self._wall(), 6), "burst": False}
        if self.burst is not None:
            self.burst.mark(sample)
        for source in self.fast_sources if fast_only else self.sources:
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
        if self.observer is not None:
            try:
                self.observer(sample)
                self._failing.discard("observer")
            except Exception as exc:  # the guard's bug must not stop sampling
                self._report("observer", exc)
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
        next_full = next_fast = self._mono()
        while not stop.is_set():
            now = self._mono()
            bursting = self.burst is not None and self.burst.active
            period = self.burst.interval(self.interval) if self.burst is not None else self.interval
            if now >= next_full:
                self.sample_once()
                next_full += self.interval
                if next_full < now:
                    next_full = now + self.interval
                next_fast = now + period
            elif bursting and now >= next_fast:
                if next_full - now > period / 2:  # else the full sample is about due anyway
                    self.sample_once(fast_only=True)
                next_fast += period
                if next_fast < now:
                    next_fast = now + period
            elif not bursting:
                next_fast = now + period
            wake = min(next_full, next_fast) if bursting else next_full
            self._sleep(max(0.0, wake - self._mono()))

    def _kick_wait(self, timeout: float) -> None:
        self._kick.wait(timeout)
        self._kick.clear()
