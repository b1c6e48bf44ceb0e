"""The read API's query and path parameters, each range-checked once here (``Annotated``
aliases the routes share): a value no column or clock can hold is a 400 naming the parameter
(see ``validation_error`` in ``collector.main``), never a database error."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query
from pydantic import AfterValidator

from collector.errors import BadRequest
from collector.hosts.names import HOST_NAME_MAX, HOST_NAME_PATTERN
from collector.readback.series import MAX_LIMIT, parse_cursor

# Epoch seconds: 0 (1970) to the last second of year 9999, what a datetime can hold.
MAX_EPOCH_S = 253_402_300_799.0
# The ids in paths (incidents, matrix runs, alert targets) are INTEGER columns: 32-bit on
# PostgreSQL.
MAX_ID = 2**31 - 1
# A bucket of a year at most (a range needs at most downsample.MAX_BUCKETS of them).
MAX_STEP_S = 366 * 86400
MAX_TEXT = 1000
# Any text but NUL, which PostgreSQL cannot compare (text values cannot hold it).
NO_NUL = r"^[^\x00]*$"

Since = Annotated[
    float | None,
    Query(
        ge=0,
        le=MAX_EPOCH_S,
        allow_inf_nan=False,
        description="epoch seconds (collector's time base), inclusive",
    ),
]
Until = Since
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"page size, 1..{MAX_LIMIT}")]
Step = Annotated[
    int | None, Query(ge=1, le=MAX_STEP_S, description="bucket width in whole seconds")
]
Text = Annotated[str | None, Query(max_length=MAX_TEXT, pattern=NO_NUL)]


def _cursor(value: str | None) -> str | None:
    try:
        return None if value is None else value and parse_cursor(value) and value
    except BadRequest as exc:
        raise ValueError(exc.detail) from None


Cursor = Annotated[
    str | None,
    Query(
        max_length=64,
        pattern=r"^-?[0-9][0-9.eE+-]*:[0-9]+$",
        description="``next_cursor`` of the previous page",
    ),
    AfterValidator(_cursor),
]
Priority = Annotated[int | None, Query(ge=0, le=7, description="syslog severity 0..7")]
HostName = Annotated[str, Path(max_length=HOST_NAME_MAX, pattern=HOST_NAME_PATTERN)]
RowId = Annotated[int, Path(ge=1, le=MAX_ID)]
ArtifactName = Annotated[str, Path(max_length=255, pattern=NO_NUL)]
