"""Per-host vLLM state kept between batches: the log parser's stream and the hang detectors.

One registry per collector process (reached through ``deps``); the rows are the truth and a
host's state is rebuilt from storage when it is missing or was dropped after a rollback.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from collector.models import HostEvent
from collector.schemas import WireSample, number
from collector.vllm.hang import HangDetector
from collector.vllm.store import VllmStream


@dataclass
class HostVllmState:
    """One host's parser stream and per-endpoint hang detectors (``lock`` guards them)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    stream: VllmStream | None = None
    detectors: dict[str, HangDetector] = field(default_factory=dict)
    last_sample_ts: dict[str, float] = field(default_factory=dict)


class VllmStates:
    """Every host's ``HostVllmState``, keyed by host id."""

    def __init__(self, hang_stall_s: float = 15.0) -> None:
        self.hang_stall_s = hang_stall_s
        self._lock = threading.Lock()
        self._hosts: dict[int, HostVllmState] = {}

    def host(self, host_id: int) -> HostVllmState:
        with self._lock:
            return self._hosts.setdefault(host_id, HostVllmState())

    def forget(self, host_id: int) -> None:
        """Drop a host's state; it is rebuilt from storage on its next batch."""
        with self._lock:
            self._hosts.pop(host_id, None)


def observe_samples(
    session: Session,
    *,
    host_id: int,
    samples: Sequence[WireSample],
    state: HostVllmState,
    stall_s: float = 15.0,
) -> list[HostEvent]:
    """Feed each sample's vLLM metrics to its endpoint's hang detector; store the verdicts."""
    events = []
    for sample in sorted(samples, key=lambda s: s.ts):
        power = number(sample.first_gpu().get("power_w"))
        for entry in sample.vllm or []:
            running, tokens = entry.get("running"), entry.get("generation_tokens")
            if number(running) is None or number(tokens) is None:
                continue
            url = str(entry.get("url") or "")
            last = state.last_sample_ts.get(url)
            if last is not None and sample.ts <= last:
                continue  # a replayed sample: the detector has moved past it
            state.last_sample_ts[url] = sample.ts
            detector = state.detectors.setdefault(url, HangDetector(stall_s))
            verdict = detector.observe(
                sample.ts, int(running), float(tokens), None if power is None else float(power)
            )
            if verdict is not None:
                data: dict[str, Any] = {**asdict(verdict), "url": url}
                data.pop("kind")
                events.append(
                    HostEvent(host_id=host_id, ts=verdict.ts, kind=verdict.kind, data=data)
                )
    session.add_all(events)
    return events
