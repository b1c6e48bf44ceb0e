"""One way to read the clock and store instants: UTC-aware datetimes and epoch seconds."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import overload

from sqlalchemy import DateTime
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def epoch() -> float:
    return time.time()


@overload
def from_epoch(ts: float) -> datetime: ...
@overload
def from_epoch(ts: None) -> None: ...
@overload
def from_epoch(ts: float | None) -> datetime | None: ...
def from_epoch(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, timezone.utc)


def to_epoch(dt: datetime | None) -> float | None:
    return None if dt is None else dt.timestamp()


class UTCDateTime(TypeDecorator[datetime]):
    """Stores aware datetimes; SQLite drops the zone, so reads are re-tagged as UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime stored; use timeutil.utcnow()")
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
