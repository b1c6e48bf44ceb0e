"""Wire records as plain row tuples in column order, for the bulk statements of ``collector.db``.

Every channel that stores lines (agent batches, netconsole, the matrix runner's server output)
builds its rows here, so a line is the same row whichever way it came.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from collector.models import CHANNEL_AGENT, CHANNEL_NETCONSOLE, fits
from collector.schemas import FITS_CHARS, WireLine, WireSample, number, truncate_line

# The typed columns of a sample: what the UI charts and SQL aggregates.
TYPED_SAMPLE_COLUMNS = (
    "mem_total", "mem_available", "mem_free", "swap_used", "gpu_mem_used", "psi_mem_some_avg10",
    "psi_mem_full_avg10", "psi_cpu_some_avg10", "psi_io_some_avg10", "psi_io_full_avg10",
    "gpu_util", "vllm_running", "vllm_waiting", "vllm_kv_usage",
)  # fmt: skip
SAMPLE_COLUMNS = ("host_id", "boot_pk", "received_at", "seq", "ts", *TYPED_SAMPLE_COLUMNS, "packed")
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


def agent_line_rows(
    common: Common, lines: Sequence[WireLine], escaped: frozenset[int]
) -> list[tuple[Any, ...]]:
    """A batch's lines as ``line_row`` builds each (agent channel), in one loop: a batch holds
    thousands, and a call with a dozen keywords a line cost more than building the row (so
    did a call to ``truncate_line`` and unpacking parts of the tuple: half of this loop's
    time; a text short enough that it cannot exceed the limit skips the call).
    ``escaped``: the positions of the texts that went through ``escape_nul``."""
    host_id, boot_pk, received_at = common
    rows = []
    for i, x in enumerate(lines):
        text, truncated = x["text"], False
        if len(text) > FITS_CHARS:
            text, truncated = truncate_line(text)
        fields = x.get("fields")
        rows.append(
            (
                host_id, boot_pk, received_at, x["seq"], x.get("kseq"), x["ts"], x["source"],
                x.get("priority"), x.get("facility"), text, truncated,
                None if fields is None else _encode(fields),
                CHANNEL_AGENT, received_at, None, i in escaped,
            )
        )  # fmt: skip
    return rows


class Packer(Protocol):
    def pack(self, data: dict[str, Any], known: dict[str, Any], *, burst: bool) -> bytes: ...


def sample_row(common: Common, sample: WireSample, packer: Packer) -> tuple[Any, ...]:
    """One sample as a SAMPLE_COLUMNS tuple: the charted metrics typed, the rest of the sample
    and its burst flag packed by ``packer`` (``collector.ingest.templates``)."""
    typed = typed_columns(sample)
    data = sample.model_dump(exclude={"seq", "ts", "burst"}, exclude_none=True)
    known = dict(zip(TYPED_SAMPLE_COLUMNS, typed, strict=True))
    return (*common, sample.seq, sample.ts, *typed, packer.pack(data, known, burst=sample.burst))


def typed_columns(sample: WireSample) -> tuple[Any, ...]:
    """The TYPED_SAMPLE_COLUMNS values of one sample, as the columns give them back (an
    integer in a Float column reads back a float): the packed row leaves out what they hold."""
    mem = sample.mem
    psi = sample.psi or {}
    swap_total, swap_free = mem.get("SwapTotal"), mem.get("SwapFree")
    gpu = sample.first_gpu()
    vllm = sample.first_vllm()
    return (
        fits(mem.get("MemTotal")),
        fits(mem.get("MemAvailable")),
        fits(mem.get("MemFree")),
        fits(swap_total - swap_free) if swap_total is not None and swap_free is not None else None,
        fits(number(gpu.get("mem_used"))),
        _psi(psi, "memory", "some"),
        _psi(psi, "memory", "full"),
        _psi(psi, "cpu", "some"),
        _psi(psi, "io", "some"),
        _psi(psi, "io", "full"),
        _real(gpu.get("util")),
        _real(vllm.get("running")),
        _real(vllm.get("waiting")),
        _real(vllm.get("kv_usage")),
    )


def _real(value: Any) -> float | None:
    value = number(value)
    return None if value is None else float(value)


def _psi(psi: dict[str, Any], resource: str, kind: str) -> float | None:
    value = (psi.get(resource) or {}).get(kind) or {}
    return _real(value.get("avg10")) if isinstance(value, dict) else None
