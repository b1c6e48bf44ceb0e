"""Parse one netconsole datagram (extended or plain) into a ``NetconsoleRecord``.

Extended payload (netconsole.rst, dev-kmsg ABI)::

    [<release>,]<prefix>,<seq>,<usec>,<flag>[,ncfrag=<off>/<total>][,caller=..][,..];<text>
     KEY=VALUE            # dictionary lines (SUBSYSTEM=, DEVICE=)
     key=value            # userdata/sysdata (msgid=, cpu=, taskname=, release=, boot=)

``prefix`` is ``(facility << 3) | level``. The text and dictionary values escape
non-printable bytes and ``\\`` as ``\\xNN``. A fragment (``ncfrag``) carries a slice of the
body (text plus dictionary lines); it is parsed by ``parse_body`` once reassembled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

_ESCAPE = re.compile(rb"\\x([0-9a-fA-F]{2})")
_NCFRAG = re.compile(r"^(\d+)/(\d+)$")
_FLAGS = frozenset({"-", "c", "+"})
# Header fields longer than this are not a header: the datagram is plain text.
_MAX_HEADER = 256


@dataclass(frozen=True)
class NetconsoleRecord:
    """One kernel record as received over netconsole (or one fragment of it)."""

    kseq: int | None
    level: int | None
    facility: int | None
    usec: int | None
    text: str
    fields: dict[str, str] = field(default_factory=dict)
    msgid: int | None = None
    boot: str | None = None
    release: str | None = None
    cpu: int | None = None
    taskname: str | None = None
    fragment: tuple[int, int] | None = None  # (byte offset, total bytes) while unassembled
    cont: bool = False  # kmsg flag "c": a continuation fragment of a printk line
    caller: str | None = None  # "T<pid>" / "C<cpu>" with CONFIG_PRINTK_CALLER
    extended: bool = True
    incomplete: bool = False  # reassembly timed out: some fragment bytes never arrived
    missing_bytes: int = 0
    body: bytes = b""  # raw body after ';' (what fragments are reassembled from)


def unescape(raw: bytes) -> str:
    """Undo the kernel's ``\\xNN`` escaping and decode UTF-8 (bad bytes become U+FFFD)."""
    if b"\\" not in raw:  # the common case: skip the regex
        return raw.decode("utf-8", errors="replace")
    return _ESCAPE.sub(lambda m: bytes((int(m.group(1), 16),)), raw).decode(
        "utf-8", errors="replace"
    )


def parse_datagram(raw: bytes) -> NetconsoleRecord:
    """Parse one datagram; anything that is not an extended header is plain console text."""
    head, sep, body = raw.partition(b";")
    newline = head.find(b"\n")
    if not sep or newline != -1 or len(head) > _MAX_HEADER:
        return _plain(raw)
    try:
        parts = head.decode("ascii").split(",")
    except UnicodeDecodeError:
        return _plain(raw)
    release = None
    if parts and not parts[0].isdigit():
        release = parts.pop(0)
    if len(parts) < 4 or not all(p.isdigit() for p in parts[:3]) or parts[3] not in _FLAGS:
        return _plain(raw)
    prefix, kseq, usec = (int(p) for p in parts[:3])
    fragment = None
    caller = None
    for part in parts[4:]:  # unknown fields are ignored, as the ABI asks
        key, _, value = part.partition("=")
        if key == "ncfrag" and (m := _NCFRAG.match(value)):
            fragment = (int(m.group(1)), int(m.group(2)))
        elif key == "caller":
            caller = value
    fields: dict[str, str]
    extra: dict[str, Any]
    if fragment is not None:
        text, fields, extra = unescape(body.split(b"\n", 1)[0]), {}, {}
    else:
        text, fields, extra = _parse_body(body)
    extra.setdefault("release", release)  # a userdata release wins over the header's
    # One constructor call: a frozen dataclass costs ~1 µs per field set (hot path of a storm).
    return NetconsoleRecord(
        kseq=kseq,
        level=prefix & 7,
        facility=prefix >> 3,
        usec=usec,
        text=text,
        fields=fields,
        fragment=fragment,
        cont=parts[3] == "c",
        caller=caller,
        body=body,
        **extra,
    )


def parse_body(header: NetconsoleRecord, body: bytes) -> NetconsoleRecord:
    """Fill text, dictionary and userdata/sysdata of ``header`` from a complete body."""
    text, fields, extra = _parse_body(body)
    return replace(header, text=text, fields=fields, fragment=None, body=body, **extra)


def _parse_body(body: bytes) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(text, dictionary fields, typed userdata such as msgid/boot) of a complete body."""
    first, *rest = body.split(b"\n")
    fields: dict[str, str] = {}
    extra: dict[str, Any] = {}
    text_tail: list[str] = []
    for line in rest:
        if not line.strip():
            continue
        key_b, eq, value_b = line[1:].partition(b"=") if line[:1] == b" " else (b"", b"", b"")
        key = key_b.decode("ascii", errors="replace")
        if not eq or not key or " " in key:
            text_tail.append(unescape(line))  # not a KEY=VALUE line: keep it as text
            continue
        value = unescape(value_b)
        _assign(key, value, fields, extra)
    text = unescape(first)
    if text_tail:
        text = "\n".join([text, *text_tail])
    return text, fields, extra


def _assign(key: str, value: str, fields: dict[str, str], extra: dict[str, Any]) -> None:
    """Route a ``key=value`` line to its typed attribute, or to ``fields``."""
    if key in ("msgid", "cpu"):
        try:
            extra[key] = int(value)
            return
        except ValueError:
            pass
    elif key in ("taskname", "release", "boot"):
        extra[key] = value
        return
    fields[key] = value


def _plain(raw: bytes) -> NetconsoleRecord:
    """A non-extended datagram: console text only, no seq (cannot dedup or detect loss)."""
    return NetconsoleRecord(
        kseq=None,
        level=None,
        facility=None,
        usec=None,
        text=raw.decode("utf-8", errors="replace").rstrip("\r\n"),
        extended=False,
        body=raw,
    )
