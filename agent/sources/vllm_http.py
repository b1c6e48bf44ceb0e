"""vLLM over HTTP: /health status and latency, and the /metrics counters that matter for hangs."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from agent import prom
from agent.http11 import Connection, RemoteDisconnected

# Wire key → metric names, first present wins (kv usage was renamed in vLLM 0.11). With data
# parallelism every engine has its own series: counts add up, the usage ratio is the busiest.
METRICS: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    # tokens of every engine step: moves during a chunked prefill, when no token is emitted
    "iteration_tokens": ("vllm:iteration_tokens_total_sum",),
    "spec_accepted": ("vllm:spec_decode_num_accepted_tokens_total",),
    "spec_draft": ("vllm:spec_decode_num_draft_tokens_total",),
}
_WANTED = {name for names in METRICS.values() for name in names}
_PEAKS = frozenset(METRICS["kv_usage"])


def metrics_from_text(text: str) -> dict[str, float | int | None]:
    """The wire's vLLM metric fields from a /metrics exposition (absent → None)."""
    found = prom.totals(text, _WANTED, _PEAKS)
    out: dict[str, float | int | None] = {}
    for key, names in METRICS.items():
        value = next((found[n] for n in names if n in found), None)
        if value is not None and key != "kv_usage" and value.is_integer():
            value = int(value)
        out[key] = value
    return out


# A /metrics answer is tens of KB; far more, unpacked, is no vLLM server.
MAX_METRICS_BYTES = 16 << 20


def _gunzip(body: bytes) -> bytes:
    """The plain body, refused past ``MAX_METRICS_BYTES``: a proxy's gzip bomb must not fill
    the agent's memory. ``zlib`` is imported only when an answer is compressed (agent RSS)."""
    import zlib

    inflater = zlib.decompressobj(wbits=31)
    try:  # errors are reported in the entry, like any bad answer
        plain = inflater.decompress(body, MAX_METRICS_BYTES + 1)
    except zlib.error as exc:
        raise OSError(f"bad gzip body: {exc}") from None
    if len(plain) > MAX_METRICS_BYTES or inflater.unconsumed_tail:
        raise OSError(f"bad gzip body: over {MAX_METRICS_BYTES} bytes unpacked")
    if not inflater.eof:
        raise OSError("bad gzip body: truncated")
    return plain


class _Endpoint:
    """One vLLM server: a persistent HTTP connection, re-made after any failure."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        self.url = url
        self._parts = parts
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._conn: Connection | None = None

    def _connection(self) -> Connection:
        if self._conn is None:
            try:
                port = self._parts.port
            except ValueError as exc:  # reported in the entry, like any unreachable server
                raise OSError(f"bad URL {self.url!r}: {exc}") from None
            https = self._parts.scheme == "https"
            host = self._parts.hostname or ""
            self._conn = Connection(host, port, timeout=self._timeout, https=https)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def get(self, path: str) -> tuple[int, bytes]:
        """GET with one immediate retry when a kept-alive connection turns out stale; a gzipped
        body (a proxy in front of vLLM may compress though we never ask) comes back plain."""
        for attempt in (0, 1):
            reused = self._conn is not None
            conn = self._connection()
            try:
                conn.request("GET", self._prefix + path)
                response = conn.getresponse()
                body = response.read()
                if (response.getheader("content-encoding") or "").strip().lower() == "gzip":
                    body = _gunzip(body)
                return response.status, body
            except (RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if not reused or attempt:
                    raise
            except Exception:
                self.close()
                raise
        raise AssertionError("unreachable")


class VllmHttpSource:
    """SampleSource ``vllm``: one entry per URL, ``{"url", "health", "health_ms", "error", ...}``.

    ``health`` is the /health HTTP status (null when nothing answered: vLLM does not listen
    while it loads); /metrics is skipped when /health did not answer, so a dead server costs
    one timeout per tick, not two.
    """

    name = "vllm"

    def __init__(
        self,
        urls: list[str],
        timeout: float = 0.5,
        *,
        monotonic: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._endpoints = [_Endpoint(url, timeout) for url in urls]
        self._monotonic = monotonic

    def _read_one(self, endpoint: _Endpoint) -> dict[str, Any]:
        entry: dict[str, Any] = {"url": endpoint.url, "health": None, "health_ms": None}
        entry.update(dict.fromkeys(METRICS))
        entry["error"] = None
        started = self._monotonic()
        try:
            status, _ = endpoint.get("/health")
        except OSError as exc:
            entry["error"] = f"health: {exc or type(exc).__name__}"
            return entry
        entry["health"] = status
        entry["health_ms"] = round((self._monotonic() - started) * 1000.0, 2)
        try:
            status, body = endpoint.get("/metrics")
        except OSError as exc:
            entry["error"] = f"metrics: {exc or type(exc).__name__}"
            return entry
        if status != 200:
            entry["error"] = f"metrics: HTTP {status}"
            return entry
        entry.update(metrics_from_text(body.decode("utf-8", errors="replace")))
        return entry

    def read(self) -> list[dict[str, Any]]:
        return [self._read_one(endpoint) for endpoint in self._endpoints]

    def close(self) -> None:
        for endpoint in self._endpoints:
            endpoint.close()
