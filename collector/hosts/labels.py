"""Host labels (``lab=a``, ``rack=3``): a few key=value pairs per host to group and filter a
fleet by, set by ``add-host --label`` and ``PATCH /api/v1/hosts/{name}``."""

from __future__ import annotations

import re

from sqlalchemy.orm import Session

from collector.errors import BadRequest
from collector.models import Host

KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,62}")
MAX_VALUE = 128
MAX_LABELS = 32


def check_key(key: str) -> str:
    if not KEY.fullmatch(key):
        raise ValueError(
            f"label key {key!r}: 1-63 letters, digits, '_', '.', '-' or '/', "
            "beginning with a letter or digit"
        )
    return key


def check_value(key: str, value: str) -> str:
    if len(value) > MAX_VALUE or not value.isprintable():
        raise ValueError(
            f"label {key}: the value must be printable, at most {MAX_VALUE} characters"
        )
    return value


def check_changes(changes: dict[str, str | None]) -> dict[str, str | None]:
    """Label changes as sent (None removes a label): keys and values valid, or ValueError."""
    for key, value in changes.items():
        check_key(key)
        if value is not None:
            check_value(key, value)
    return changes


def parse(spec: str) -> tuple[str, str | None]:
    """``key=value`` → (key, value); a bare ``key`` → (key, None): any value."""
    key, sep, value = spec.partition("=")
    key = check_key(key.strip())
    return (key, check_value(key, value.strip())) if sep else (key, None)


def set_labels(session: Session, *, host: Host, changes: dict[str, str | None]) -> None:
    """Add, change (a value) or remove (None) the host's labels; BadRequest past the limits."""
    labels = dict(host.labels or {})
    try:
        check_changes(changes)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    for key, value in changes.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    if len(labels) > MAX_LABELS:
        raise BadRequest(f"a host has at most {MAX_LABELS} labels")
    host.labels = labels or None
    session.flush()


def matches(host: Host, wanted: list[tuple[str, str | None]]) -> bool:
    """Whether the host carries every wanted label (a None value: the key with any value)."""
    labels = host.labels or {}
    return all(k in labels and (v is None or labels[k] == v) for k, v in wanted)
