"""A parsed netconsole record made storable under the same rules as an agent's batch.

Whatever a datagram says (a printed ``\\x00`` the kernel escaped, a header number of 30
digits), the record is stored: NUL in the text is escaped and the line flagged, a number that
no column holds is dropped from its column (the text and the raw datagram keep it), a boot id
that is not a printable identifier is ignored.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from collector.ingest.rows import to_json
from collector.models import fits
from collector.netconsole.parse import NetconsoleRecord
from collector.schemas import escape_nul

_BOOT_ID = re.compile(r"[^\x00-\x1f\x7f]{1,64}")


def storable(record: NetconsoleRecord) -> tuple[NetconsoleRecord, bool]:
    """(``record`` with every value fitting its column, whether its text was escaped)."""
    escaped = "\x00" in record.text
    boot = record.boot
    fitted = replace(
        record,
        text=escape_nul(record.text) if escaped else record.text,
        kseq=fits(record.kseq),
        usec=fits(record.usec),
        msgid=fits(record.msgid),
        cpu=fits(record.cpu, 32),
        level=fits(record.level, 32),
        facility=fits(record.facility, 32),
        boot=boot if boot is not None and _BOOT_ID.fullmatch(boot) else None,
    )
    return fitted, escaped


def record_fields(r: NetconsoleRecord) -> str | None:
    """The line's ``fields`` JSON: the record's dictionary and the header facts no column has."""
    fields: dict[str, Any] = dict(r.fields)
    # Hot path of a storm: plain ifs, one reused encoder.
    if r.usec is not None:
        fields["usec"] = r.usec
    if r.msgid is not None:
        fields["msgid"] = r.msgid
    if r.cpu is not None:
        fields["cpu"] = r.cpu
    if r.taskname is not None:
        fields["taskname"] = r.taskname
    if r.release is not None:
        fields["release"] = r.release
    if r.caller is not None:
        fields["caller"] = r.caller
    if r.missing_bytes:
        fields["missing_bytes"] = r.missing_bytes
    return to_json(fields) if fields else None
