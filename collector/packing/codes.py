"""One leaf value as bytes, read in the type of the template's value at that leaf.

Each value is one varint ``code + 1`` (0 escapes to a tagged value of any type):
- an integer: zigzag of its difference from the template's; in KiB when the template's is a
  whole number of MiB or more in KiB (meminfo's values), which then must be too (else escaped);
- a float that is a whole number of the template's last decimal (at least the second: PSI,
  load, latencies): zigzag of its difference from the template's in those units, << 1;
- another float: (zigzag(m) << 3 | e) << 1 | 1 where value = m / 10**e (its shortest digits,
  e <= 6), or e = 7: its 8 raw bytes follow.
m / 10**e of exact integers (below 2**53) rounds once, to the double ``repr`` named.
"""

from __future__ import annotations

import json
import struct
from math import copysign
from typing import Any

from collector.packing.shape import json_text

KIB = 1024
_MIB = 2**20
_COMMON_E = 2
_MAX_E = 6
_RAW = 7
_SAFE = 2**53
_DOUBLE = struct.Struct("<d")
# Tags of an escaped value.
_NONE, _FALSE, _TRUE, _INT, _FLOAT, _JSON, _DELTA = range(7)
INT, FLOAT, OTHER = range(3)
# What a template's value at a leaf says of the values there: (INT, value, in KiB),
# (FLOAT, value, decimals or None, value in units of those decimals), (OTHER, value, ...).
Leaf = tuple[int, Any, Any, Any]


class PackError(ValueError):
    """Bytes that are not a packed sample of this template."""


def leaf_of(value: Any) -> Leaf:
    """How values at a leaf are coded, from the template's value there."""
    kind = type(value)
    if kind is int:
        return (INT, value, value % KIB == 0 and abs(value) >= _MIB, None)
    if kind is float:
        digits = decimal(value)
        if digits is None or digits[1] > _MAX_E:
            return (FLOAT, value, None, None)
        e = max(digits[1], _COMMON_E)
        return (FLOAT, value, e, digits[0] * 10 ** (e - digits[1]))
    return (OTHER, value, None, None)


def decimal(value: float) -> tuple[int, int] | None:
    """(m, e) with value == m / 10**e exactly, from its shortest digits; None when there are
    none such (an exponent, -0.0, more than 2**53)."""
    digits = repr(value)
    point = digits.find(".")
    if point < 0 or "e" in digits or digits == "-0.0":
        return None
    if digits.endswith(".0"):
        m, e = int(digits[:point]), 0
    else:
        m, e = int(digits[:point] + digits[point + 1 :]), len(digits) - point - 1
    return (m, e) if abs(m) < _SAFE else None


def zigzag(n: int) -> int:
    return n << 1 if n >= 0 else (-n << 1) - 1


def unzigzag(n: int) -> int:
    return n >> 1 if not n & 1 else -((n + 1) >> 1)


def put_varint(n: int, out: bytearray) -> None:
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def get_varint(blob: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = blob[at]
        n |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return n, at
        shift += 7


def put_value(value: Any, leaf: Leaf, out: bytearray) -> None:
    """One changed leaf (``get_value`` reads it back); zigzag and varint inline: this runs for
    every moved value of every sample."""
    kind, base, how, scaled = leaf
    if kind == INT and type(value) is int:
        delta = value - base
        if how:
            if delta % KIB:
                out += bytes((0, _DELTA))
                put_varint(zigzag(delta), out)
                return
            delta //= KIB
    elif kind == FLOAT and type(value) is float:
        if how is None or not -_SAFE < value < _SAFE:
            _put_long_float(value, out)
            return
        scale = 10**how
        m = round(value * scale)
        # decoding divides the same integers: the same double (-0.0 aside)
        if m / scale != value or not (m or copysign(1, value) > 0):
            _put_long_float(value, out)
            return
        delta = m - scaled
    else:
        out.append(0)
        _put_tagged(value, out)
        return
    code = (delta << 1 if delta >= 0 else (~delta << 1) | 1) + 1
    if kind == FLOAT:
        code = (code << 1) - 1  # (zigzag << 1 | 0) + 1
    while code > 0x7F:
        out.append(code & 0x7F | 0x80)
        code >>= 7
    out.append(code)


def _put_long_float(value: float, out: bytearray) -> None:
    digits = decimal(value)
    if digits is not None and digits[1] <= _MAX_E:
        put_varint(((zigzag(digits[0]) << 3 | digits[1]) << 1 | 1) + 1, out)
    else:
        put_varint((_RAW << 1 | 1) + 1, out)
        out += _DOUBLE.pack(value)


def get_value(blob: bytes, at: int, leaf: Leaf) -> tuple[Any, int]:
    code = shift = 0
    while True:  # the varint, inline (see put_value)
        byte = blob[at]
        code |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            break
        shift += 7
    if code == 0:
        return _get_tagged(blob, at, leaf)
    code -= 1
    kind, base, how, scaled = leaf
    if kind == INT:
        return base + unzigzag(code) * (KIB if how else 1), at
    if kind != FLOAT:
        raise PackError("a number at a leaf that holds none")
    if not code & 1:
        return (unzigzag(code >> 1) + scaled) / 10**how, at
    e = code >> 1 & 0x7
    if e == _RAW:
        return float(_DOUBLE.unpack_from(blob, at)[0]), at + 8
    return unzigzag(code >> 4) / 10**e, at


def _put_tagged(value: Any, out: bytearray) -> None:
    if value is None:
        out.append(_NONE)
    elif value is True or value is False:
        out.append(_TRUE if value else _FALSE)
    elif type(value) is int:
        out.append(_INT)
        put_varint(zigzag(value), out)
    elif type(value) is float:
        out.append(_FLOAT)
        out += _DOUBLE.pack(value)
    else:
        text = json_text(value).encode("utf-8", "surrogatepass")
        out.append(_JSON)
        put_varint(len(text), out)
        out += text


def _get_tagged(blob: bytes, at: int, leaf: Leaf) -> tuple[Any, int]:
    tag = blob[at]
    at += 1
    if tag == _NONE:
        return None, at
    if tag in (_FALSE, _TRUE):
        return tag == _TRUE, at
    if tag in (_INT, _DELTA):
        n, at = get_varint(blob, at)
        return unzigzag(n) + (leaf[1] if tag == _DELTA else 0), at
    if tag == _FLOAT:
        return float(_DOUBLE.unpack_from(blob, at)[0]), at + 8
    if tag == _JSON:
        n, at = get_varint(blob, at)
        if at + n > len(blob):
            raise PackError("truncated")
        return json.loads(blob[at : at + n].decode("utf-8", "surrogatepass")), at + n
    raise PackError(f"tag {tag}")
