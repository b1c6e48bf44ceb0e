"""The vLLM phase the host is in, from vLLM's own log lines as the agent ships them.

Phase names are the collector's (``agent.wire.VLLM_PHASES``); the markers are the phrases the
collector's log parser enters each phase on (``collector.vllm.log_formats``), reduced to
substring tests, and tests hold the two to the same phase sequence on real logs. Until a line
says which phase it is, a ``/health`` answer of 200 in a sample means ``serving`` (the agent
started while vLLM was already up).
"""

from __future__ import annotations

import threading
from typing import Any

START: tuple[str, ...] = ("vLLM server version ", "vLLM API server version ", "non-default args: ")
START += ("Initializing a V1 LLM engine",)
LOAD = ("Starting to load model", "Loading safetensors checkpoint shards", "Loading weights took")
# Phases a started server moves through; when one line says several, the last listed wins.
MARKERS = (
    ("loading_drafter", ("Loading drafter model",)),
    ("profiling", ("Profiling CUDA graph memory", "Estimated CUDA graph memory")),
    ("profiling", ("Available KV cache memory", "KV cache size: ", "Maximum concurrency for ")),
    ("profiling", ("Memory profiling takes",)),
    ("capturing_cuda_graphs", ("Capturing CUDA graph", "Graph capturing finished")),
    (
        "serving",
        ("Starting vLLM API server", "Starting vLLM server", "Application startup complete"),
    ),
)
# An ERROR (or level-less) line with one of these: the start failed.
FAILED: tuple[str, ...] = ("EngineCore failed to start", "EngineCore encountered a fatal error")
FAILED += ("Engine core initialization failed", "EngineDeadError", "CUDA out of memory")
FAILED += ("OutOfMemoryError", "No available memory for the cache blocks")
FAILED += ("is less than desired GPU memory utilization", "not enough GPU memory")
FAILED += ("To serve at least one request with the model's max seq len",)
STOPPED = ("Application shutdown complete", "Finished server process")
ENDED = ("serving", "stopped", "failed")
QUIET_PRIORITIES = (4, 6, 7)  # WARNING, INFO, DEBUG (agent.sources.lines)


class PhaseTracker:
    """Thread-safe: line sources feed it, the sampler thread reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phase: str | None = None
        self._from_log = False

    @property
    def phase(self) -> str | None:
        with self._lock:
            return self._phase

    def observe_line(self, line: dict[str, Any]) -> None:
        if line.get("source") != "vllm":
            return
        phase = self._next(self._phase, line)
        if phase is not None:
            with self._lock:
                self._phase, self._from_log = phase, True

    def observe_sample(self, sample: dict[str, Any]) -> None:
        if self._from_log:
            return
        healthy = any(v.get("health") == 200 for v in sample.get("vllm") or [])
        with self._lock:
            self._phase = "serving" if healthy else self._phase

    @staticmethod
    def _next(current: str | None, line: dict[str, Any]) -> str | None:
        """The phase after ``line``, or None while no server start was seen."""
        text = line.get("text") or ""
        if any(s in text for s in START):
            return "starting"
        phase = current
        if any(s in text for s in LOAD) and current in (None, "starting", *ENDED):
            phase = "loading_weights"
        if phase is None:
            return None
        for name, phrases in MARKERS:
            if any(s in text for s in phrases):
                phase = name
        loud = line.get("priority") not in QUIET_PRIORITIES
        if loud and phase != "failed" and any(s in text for s in FAILED):
            phase = "failed"
        shutdown = any(s in text for s in STOPPED) or text.rstrip().endswith(
            "INFO:     Shutting down"
        )
        if shutdown and phase not in ("stopped", "failed"):
            phase = "stopped"
        return phase
