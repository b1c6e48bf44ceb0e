"""Per-host gauges: liveness, heartbeat age, the agent, and the latest sample's memory, PSI,
GPU and vLLM figures, read from the database at scrape time."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy.orm import Session

import agent
from collector.hosts.registry import agent_outdated, list_hosts
from collector.models import Host, HostStatus, Sample
from collector.readback.series import latest_sample
from collector.schemas import number
from collector.timeutil import to_epoch
from collector.vllm.status import latest_vllm_phase

STATUSES = tuple(s.value for s in HostStatus)
PRESSURE = (  # (resource, kind, Sample column)
    ("memory", "some", "psi_mem_some_avg10"),
    ("memory", "full", "psi_mem_full_avg10"),
    ("cpu", "some", "psi_cpu_some_avg10"),
    ("io", "some", "psi_io_some_avg10"),
    ("io", "full", "psi_io_full_avg10"),
)
GPU_FIELDS = (  # (metric suffix, section key, help)
    ("utilization_percent", "util", "GPU utilization (NVML), percent."),
    ("memory_used_bytes", "mem_used", "GPU memory in use (NVML)."),
    ("memory_total_bytes", "mem_total", "GPU memory size (NVML)."),
    ("temperature_celsius", "temp_c", "GPU temperature (NVML)."),
    ("power_watts", "power_w", "GPU power draw (NVML)."),
)
VLLM_GAUGES = (
    ("requests_running", "running", "Requests vLLM is running."),
    ("requests_waiting", "waiting", "Requests waiting in vLLM's queue."),
    ("kv_cache_usage_ratio", "kv_usage", "vLLM KV-cache usage, 0 to 1."),
)
VLLM_COUNTERS = (
    ("preemptions", "preemptions", "Requests vLLM preempted (its own counter)."),
    ("prompt_tokens", "prompt_tokens", "Prompt tokens vLLM processed (its own counter)."),
    ("generation_tokens", "generation_tokens", "Tokens vLLM generated (its own counter)."),
    ("spec_decode_accepted_tokens", "spec_accepted", "Speculative tokens accepted."),
    ("spec_decode_draft_tokens", "spec_draft", "Speculative tokens drafted."),
)
MAX_DEVICES = 16


def collector_version() -> str:
    try:
        return version("freezewatch")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _gauge(name: str, help_: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"freezewatch_{name}", help_, labels=labels)


def _entries(section: Any) -> list[dict[str, Any]]:
    """A sample's gpu/vllm section as a list of devices/endpoints (a dict, a list, or a dict
    with ``devices``)."""
    if isinstance(section, dict):
        section = section.get("devices") or [section]
    if not isinstance(section, list):
        return []
    return [e for e in section[:MAX_DEVICES] if isinstance(e, dict)]


def host_metrics(session: Session, *, now: float) -> Iterator[Metric]:
    hosts = list_hosts(session)
    yield from liveness(hosts, now=now)
    samples = {h.name: latest_sample(session, host_id=h.id) for h in hosts}
    yield from memory(samples)
    yield from gpu(samples)
    yield from vllm(session, hosts, samples)


def liveness(hosts: list[Host], *, now: float) -> Iterator[Metric]:
    counts = _gauge("hosts", "Registered hosts by liveness status.", ["status"])
    status = _gauge(
        "host_status", "1 for the host's liveness status, 0 for the others.", ["host", "status"]
    )
    up = _gauge("host_up", "1 while the host's heartbeats arrive (status up).", ["host"])
    seen = _gauge(
        "host_last_heartbeat_timestamp_seconds", "Last batch received (collector clock).", ["host"]
    )
    age = _gauge("host_seconds_since_heartbeat", "Seconds since the last batch arrived.", ["host"])
    info = _gauge("host_agent_info", "The host's agent version (1).", ["host", "version"])
    outdated = _gauge(
        "host_agent_outdated",
        "1 when the agent's version differs from this collector's bundle.",
        ["host"],
    )
    for s in STATUSES:
        counts.add_metric([s], sum(1 for h in hosts if h.status == s))
    for h in hosts:
        for s in STATUSES:
            status.add_metric([h.name, s], 1.0 if h.status == s else 0.0)
        up.add_metric([h.name], 1.0 if h.status == HostStatus.UP else 0.0)
        last = to_epoch(h.last_seen_at)
        if last is not None:
            seen.add_metric([h.name], last)
            age.add_metric([h.name], max(0.0, now - last))
        if h.agent_version:
            info.add_metric([h.name, h.agent_version], 1.0)
            outdated.add_metric([h.name], 1.0 if agent_outdated(h) else 0.0)
    collector = _gauge(
        "collector_info",
        "This collector's version and its agent bundle's.",
        ["version", "agent_version"],
    )
    collector.add_metric([collector_version(), agent.__version__], 1.0)
    yield from (counts, status, up, seen, age, info, outdated, collector)


def memory(samples: dict[str, Sample | None]) -> Iterator[Metric]:
    ts = _gauge(
        "host_sample_timestamp_seconds", "The latest sample's time (agent clock).", ["host"]
    )
    total = _gauge("host_memory_total_bytes", "MemTotal of the latest sample.", ["host"])
    available = _gauge(
        "host_memory_available_bytes", "MemAvailable of the latest sample.", ["host"]
    )
    used = _gauge(
        "host_memory_used_bytes", "MemTotal - MemAvailable of the latest sample.", ["host"]
    )
    swap = _gauge("host_swap_used_bytes", "Swap in use in the latest sample.", ["host"])
    load = _gauge("host_load1", "1-minute load average of the latest sample.", ["host"])
    psi = _gauge(
        "host_pressure_avg10_percent",
        "PSI avg10 of the latest sample, percent of time stalled.",
        ["host", "resource", "kind"],
    )
    for name, s in samples.items():
        if s is None:
            continue
        ts.add_metric([name], s.ts)
        for family, value in (
            (total, s.mem_total),
            (available, s.mem_available),
            (swap, s.swap_used),
            (load, s.load1),
        ):
            if value is not None:
                family.add_metric([name], float(value))
        if s.mem_total is not None and s.mem_available is not None:
            used.add_metric([name], float(s.mem_total - s.mem_available))
        for resource, kind, column in PRESSURE:
            value = getattr(s, column)
            if value is not None:
                psi.add_metric([name, resource, kind], float(value))
    yield from (ts, total, available, used, swap, load, psi)


def gpu(samples: dict[str, Sample | None]) -> Iterator[Metric]:
    fields = [
        (_gauge(f"host_gpu_{suffix}", help_, ["host", "gpu"]), key)
        for suffix, key, help_ in GPU_FIELDS
    ]
    clocks = _gauge("host_gpu_clock_hertz", "GPU clocks (NVML).", ["host", "gpu", "clock"])
    for name, s in samples.items():
        for i, device in enumerate(_entries((s.data or {}).get("gpu") if s else None)):
            index = str(device.get("index", i))
            for family, key in fields:
                value = number(device.get(key))
                if value is not None:
                    family.add_metric([name, index], float(value))
            for clock, mhz in (device.get("clocks") or {}).items():
                if clock in ("sm", "mem", "graphics") and number(mhz) is not None:
                    clocks.add_metric([name, index, clock], mhz * 1e6)
    yield from (f for f, _ in fields)
    yield clocks


def vllm(
    session: Session, hosts: list[Host], samples: dict[str, Sample | None]
) -> Iterator[Metric]:
    labels = ["host", "endpoint"]
    up = _gauge("host_vllm_up", "1 when vLLM's /health answered 200 in the latest sample.", labels)
    health = _gauge(
        "host_vllm_health_seconds", "vLLM /health latency in the latest sample.", labels
    )
    gauges = [(_gauge(f"host_vllm_{n}", h, labels), key) for n, key, h in VLLM_GAUGES]
    counters = [
        (CounterMetricFamily(f"freezewatch_host_vllm_{n}", h, labels=labels), key)
        for n, key, h in VLLM_COUNTERS
    ]
    phase = _gauge(
        "host_vllm_phase", "The phase of the latest vLLM server start (1).", ["host", "phase"]
    )
    for h in hosts:
        current = latest_vllm_phase(session, host_id=h.id)
        if current:
            phase.add_metric([h.name, current], 1.0)
        s = samples.get(h.name)
        for i, entry in enumerate(_entries((s.data or {}).get("vllm") if s else None)):
            endpoint = str(entry.get("url") or i)
            up.add_metric([h.name, endpoint], 1.0 if entry.get("health") == 200 else 0.0)
            if number(entry.get("health_ms")) is not None:
                health.add_metric([h.name, endpoint], entry["health_ms"] / 1000.0)
            families: list[tuple[GaugeMetricFamily | CounterMetricFamily, str]]
            families = [*gauges, *counters]
            for family, key in families:
                value = number(entry.get(key))
                if value is not None:
                    family.add_metric([h.name, endpoint], float(value))
    yield from (up, health, *(f for f, _ in gauges), *(f for f, _ in counters), phase)
