"""A sample's row bytes: packed against its template, or plain.

A packed row: a byte of format and flags, the template's id (varint), a bitmap of the leaves
whose value differs from the template's (the leaves the typed columns hold left out), then each
of those values (``codes``). A typed-column leaf whose column does not give its value back
exactly (a type the column does not keep) is flagged, and a second bitmap names those.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from itertools import count
from math import copysign
from typing import Any

from collector.packing.codes import PackError, get_value, get_varint, leaf_of, put_value, put_varint
from collector.packing.shape import build, flatten, json_text, plan, take

FORMAT_PLAIN = 0
FORMAT_PACKED = 1
_FORMAT = 0x0F
_BURST = 0x10
_KNOWN_KEPT = 0x20  # some typed-column leaves are in the row: their bitmap follows

# The leaves the typed sample columns hold, by path, and the column that holds each.
KNOWN_PATHS: dict[tuple[str | int, ...], str] = {
    ("mem", "MemTotal"): "mem_total",
    ("mem", "MemAvailable"): "mem_available",
    ("mem", "MemFree"): "mem_free",
    ("psi", "memory", "some", "avg10"): "psi_mem_some_avg10",
    ("psi", "memory", "full", "avg10"): "psi_mem_full_avg10",
    ("psi", "cpu", "some", "avg10"): "psi_cpu_some_avg10",
    ("psi", "io", "some", "avg10"): "psi_io_some_avg10",
    ("psi", "io", "full", "avg10"): "psi_io_full_avg10",
    ("gpu", "util"): "gpu_util",
    ("gpu", 0, "util"): "gpu_util",
    ("gpu", "mem_used"): "gpu_mem_used",
    ("gpu", 0, "mem_used"): "gpu_mem_used",
    ("vllm", 0, "running"): "vllm_running",
    ("vllm", 0, "waiting"): "vllm_waiting",
    ("vllm", 0, "kv_usage"): "vllm_kv_usage",
}


class Template:
    """A host's first sample of a shape that day: the values its rows leave out, and how to
    rebuild a row's dict."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.tokens, self.values = flatten(data)
        self.plan, paths = plan(self.tokens)
        self.leaves = [leaf_of(v) for v in self.values]
        # leaf index -> typed column, for the leaves a row's columns hold
        self.known = {i: KNOWN_PATHS[p] for i, p in enumerate(paths) if p in KNOWN_PATHS}
        # the other leaves: their place in the row's bitmap
        self.bit = {i: n for n, i in enumerate(i for i in range(len(paths)) if i not in self.known)}
        self.nulls = self.values.count(None)

    def values_of(self, data: dict[str, Any]) -> list[Any] | None:
        """``data``'s leaf values if it has this template's shape (keys, nesting, as many
        nulls), else None: what ``flatten`` and a lookup by shape would give, cheaper."""
        values: list[Any] = []
        if not take(self.plan, data, values) or values.count(None) != self.nulls:
            return None
        return values

    @classmethod
    def from_body(cls, body: bytes) -> Template:
        """The template stored as ``body`` (``Template.body``)."""
        return cls(json.loads(zlib.decompress(body)))

    def body(self) -> bytes:
        return zlib.compress(json_text(self.data).encode("utf-8", "surrogatepass"), 9)


def pack_plain(data: Mapping[str, Any], *, burst: bool = False) -> bytes:
    """A row without a template: zlib-compressed JSON."""
    text = json_text(data).encode("utf-8", "surrogatepass")
    return bytes((FORMAT_PLAIN | (_BURST if burst else 0),)) + zlib.compress(text)


def pack(
    values: list[Any],
    template: Template,
    *,
    template_id: int,
    known: Mapping[str, Any],
    burst: bool = False,
) -> bytes:
    """The row of a sample whose leaves are ``values`` (``flatten``, the template's shape);
    ``known``: the row's typed columns, which give back the leaves they hold; ``burst``: the
    sample's flag."""
    base = template.values
    if len(values) != len(base):
        raise PackError("not the template's shape")
    changed = {
        i
        for i, v, t in zip(count(), values, base)
        if v != t
        or type(v) is not type(t)
        or (not v and type(v) is float and copysign(1, v) != copysign(1, t))
    }
    kept = 0  # typed-column leaves the row must hold
    for n, (i, column) in enumerate(template.known.items()):
        value = values[i]
        # -0.0 stays in the row: SQLite stores a whole REAL as an integer, losing its sign
        if _same(_from_column(known.get(column), base[i]), value) and str(value) != "-0.0":
            changed.discard(i)
        else:
            changed.add(i)
            kept |= 1 << n
    out = bytearray((FORMAT_PACKED | (_BURST if burst else 0) | (_KNOWN_KEPT if kept else 0),))
    put_varint(template_id, out)
    payload = bytearray()
    bits = 0
    bit = template.bit
    for i in sorted(changed):
        if i in bit:
            bits |= 1 << bit[i]
        put_value(values[i], template.leaves[i], payload)
    out += bits.to_bytes((len(bit) + 7) // 8, "little")
    if kept:
        out += kept.to_bytes((len(template.known) + 7) // 8, "little")
    out += payload
    return bytes(out)


def header(blob: bytes) -> tuple[bool, int | None]:
    """(the sample's burst flag, the id of the template it is packed against, or None)."""
    if not blob:
        raise PackError("empty")
    burst = bool(blob[0] & _BURST)
    if blob[0] & _FORMAT == FORMAT_PLAIN:
        return burst, None
    try:
        return burst, get_varint(blob, 1)[0]
    except IndexError as exc:
        raise PackError("truncated") from exc


def unpack(blob: bytes, template: Template | None, known: Mapping[str, Any]) -> dict[str, Any]:
    """The sample's dict back from its row (``pack``, ``pack_plain``); ``template``: the one
    ``header`` names."""
    try:
        return _unpack(blob, template, known)
    except (IndexError, ValueError, struct.error, StopIteration, zlib.error) as exc:
        raise PackError(f"not a packed sample: {exc}") from exc


def _unpack(blob: bytes, template: Template | None, known: Mapping[str, Any]) -> dict[str, Any]:
    kind = blob[0] & _FORMAT
    if kind == FORMAT_PLAIN:
        out: dict[str, Any] = json.loads(zlib.decompress(blob[1:]))
        return out
    if kind != FORMAT_PACKED or template is None:
        raise PackError(f"format {kind} without its template")
    _, at = get_varint(blob, 1)
    width = (len(template.bit) + 7) // 8
    bits = int.from_bytes(blob[at : at + width], "little")
    at += width
    kept = 0
    if blob[0] & _KNOWN_KEPT:
        known_width = (len(template.known) + 7) // 8
        kept = int.from_bytes(blob[at : at + known_width], "little")
        at += known_width
    values = list(template.values)
    explicit = [i for i, n in template.bit.items() if bits >> n & 1]
    for n, (i, column) in enumerate(template.known.items()):
        if kept >> n & 1:
            explicit.append(i)
        else:
            values[i] = _from_column(known.get(column), values[i])
    for i in sorted(explicit):
        values[i], at = get_value(blob, at, template.leaves[i])
    return dict(build(template.plan, iter(values)))


def _same(a: Any, b: Any) -> bool:
    """Equal and of one type; 0.0 and -0.0 differ (JSON writes the sign)."""
    if a != b or type(a) is not type(b):
        return False
    return type(a) is not float or bool(a) or copysign(1, a) == copysign(1, b)


def _from_column(column: Any, like: Any) -> Any:
    """A typed column's value in the type of the template's leaf (a Float column gives 3.0
    back for 3)."""
    if column is None:
        return None
    if type(like) is int and isinstance(column, float) and column.is_integer():
        return int(column)
    if type(like) is float and type(column) is int:
        return float(column)
    return column
