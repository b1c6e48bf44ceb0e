"""Per-host vLLM state kept between batches: the log parser's stream and the hang detectors.

One registry per collector process (reached through ``deps``); the rows are the truth and a
host's state is rebuilt from storage when it is missing or was dropped after a rollback.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select
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
    # Endpoints without vllm:* metrics (hang detection off), already reported.
    unwatchable: set[str] = field(default_factory=set)


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
    """Feed each sample's vLLM metrics to its endpoint's hang detector; store the verdicts.

    A healthy server whose /metrics has no ``vllm:*`` series (started with
    ``--disable-log-stats``) cannot be watched: that is reported once, as
    ``vllm_hang_detection_off``, not passed over in silence."""
    events = []
    for sample in sorted(samples, key=lambda s: s.ts):
        power = number(sample.first_gpu().get("power_w"))
        for entry in sample.vllm or []:
            url = str(entry.get("url") or "")
            running, tokens = number(entry.get("running")), number(entry.get("generation_tokens"))
            if running is None or tokens is None:
                if entry.get("health") == 200 and not entry.get("error"):
                    events += _detection_off(session, host_id, state, url, sample.ts)
                continue
            state.unwatchable.discard(url)
            last = state.last_sample_ts.get(url)
            if last is not None and sample.ts <= last:
                continue  # a replayed sample: the detector has moved past it
            state.last_sample_ts[url] = sample.ts
            detector = state.detectors.setdefault(url, HangDetector(stall_s))
            verdict = detector.observe(
                sample.ts,
                int(running),
                float(tokens),
                None if power is None else float(power),
                waiting=int(number(entry.get("waiting")) or 0),
                prompt_tokens=number(entry.get("prompt_tokens")),
                iteration_tokens=number(entry.get("iteration_tokens")),
                kv_usage=number(entry.get("kv_usage")),
            )
            if verdict is not None:
                data: dict[str, Any] = {**asdict(verdict), "url": url}
                data.pop("kind")
                events.append(
                    HostEvent(host_id=host_id, ts=verdict.ts, kind=verdict.kind, data=data)
                )
    session.add_all(events)
    return events


DETECTION_OFF = "vllm_hang_detection_off"


def _detection_off(
    session: Session, host_id: int, state: HostVllmState, url: str, ts: float
) -> list[HostEvent]:
    """The one ``vllm_hang_detection_off`` of an endpoint (also across collector restarts)."""
    if url in state.unwatchable:
        return []
    state.unwatchable.add(url)
    reported = session.scalars(
        select(HostEvent.data)
        .where(HostEvent.host_id == host_id, HostEvent.kind == DETECTION_OFF)
        .order_by(HostEvent.ts.desc())
        .limit(50)
    )
    if any((data or {}).get("url") == url for data in reported):
        return []
    reason = "no vllm:* metrics on /metrics (the server runs with --disable-log-stats?)"
    return [
        HostEvent(host_id=host_id, ts=ts, kind=DETECTION_OFF, data={"url": url, "reason": reason})
    ]
