"""Wire records as plain row tuples in column order, for the bulk statements of ``collector.db``.

Every channel that stores lines (agent batches, netconsole, the matrix runner's server output)
builds its rows here, so a line is the same row whichever way it came.
"""

from __future__ import annotations

import json
from typing import Any

from collector.models import CHANNEL_AGENT, CHANNEL_NETCONSOLE, fits
from collector.schemas import WireSample, number

SAMPLE_COLUMNS = (
    "host_id", "boot_pk", "received_at", "seq", "ts", "burst", "mem_total", "mem_available",
    "mem_free", "swap_used", "psi_mem_some_avg10", "psi_mem_full_avg10", "psi_cpu_some_avg10",
    "psi_io_some_avg10", "psi_io_full_avg10", "load1", "gpu_util", "gpu_mem_used", "gpu_power_w",
    "vllm_running", "vllm_waiting", "vllm_kv_usage", "data",
)  # fmt: skip
LINE_COLUMNS = (
    "host_id", "boot_pk", "received_at", "seq", "kseq", "ts", "source", "priority", "facility",
    "text", "truncated", "fields", "channels", "agent_received_at", "netconsole_received_at",
    "escaped",
)  # fmt: skip
EVENT_COLUMNS = ("host_id", "boot_pk", "received_at", "seq", "ts", "kind", "data")
COLUMN = {name: i for i, name in enumerate(LINE_COLUMNS)}

# (host_id, boot_pk, received_at): what every row of one batch shares.
Common = tuple[int, int, float]

_encode = json.JSONEncoder(separators=(",", ":")).encode


def to_json(value: Any) -> str | None:
    return None if value is None else _encode(value)


def line_row(
    common: Common,
    *,
    seq: int | None,
    kseq: int | None,
    ts: float,
    source: str,
    priority: int | None,
    facility: int | None,
    text: str,
    truncated: bool,
    fields: str | None,
    channel: int = CHANNEL_AGENT,
    escaped: bool = False,
) -> tuple[Any, ...]:
    """One line as a LINE_COLUMNS tuple; ``fields`` is already JSON, ``channel`` the one
    channel that brought it (its arrival time is the batch's ``received_at``), ``escaped``:
    ``text`` went through ``escape_nul``."""
    received_at = common[2]
    return (
        *common,
        *(seq, kseq, ts, source, priority, facility, text, truncated, fields, channel),
        received_at if channel == CHANNEL_AGENT else None,
        received_at if channel == CHANNEL_NETCONSOLE else None,
        escaped,
    )


def sample_row(common: Common, sample: WireSample) -> tuple[Any, ...]:
    """One sample as a SAMPLE_COLUMNS tuple: the charted metrics typed, the whole in ``data``."""
    mem = sample.mem
    psi = sample.psi or {}
    swap_total, swap_free = mem.get("SwapTotal"), mem.get("SwapFree")
    gpu = sample.first_gpu()
    vllm = sample.first_vllm()
    return (
        *common,
        sample.seq,
        sample.ts,
        sample.burst,
        fits(mem.get("MemTotal")),
        fits(mem.get("MemAvailable")),
        fits(mem.get("MemFree")),
        fits(swap_total - swap_free) if swap_total is not None and swap_free is not None else None,
        _psi(psi, "memory", "some"),
        _psi(psi, "memory", "full"),
        _psi(psi, "cpu", "some"),
        _psi(psi, "io", "some"),
        _psi(psi, "io", "full"),
        (sample.load or {}).get("1"),
        number(gpu.get("util")),
        fits(number(gpu.get("mem_used"))),
        number(gpu.get("power_w")),
        number(vllm.get("running")),
        number(vllm.get("waiting")),
        number(vllm.get("kv_usage")),
        to_json(sample.model_dump(exclude={"seq", "ts", "burst"}, exclude_none=True)),
    )


def _psi(psi: dict[str, Any], resource: str, kind: str) -> int | float | None:
    value = (psi.get(resource) or {}).get(kind) or {}
    return number(value.get("avg10")) if isinstance(value, dict) else None
