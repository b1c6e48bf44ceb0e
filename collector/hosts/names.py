"""What a host may be called: one rule for ``add-host`` and for the API's ``/hosts/{name}``
paths, so every registered host can be reached (a name is a URL path segment, a Prometheus
label value, part of a file name on the host)."""

from __future__ import annotations

import re

from collector.errors import BadRequest

HOST_NAME_MAX = 253
# A DNS name's characters (and ``_``), starting with a letter or digit: no ``/``, no spaces.
HOST_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_HOST_NAME = re.compile(HOST_NAME_PATTERN)


def check_host_name(name: str) -> str:
    """``name`` if a host may be called that, else BadRequest saying what a name may hold."""
    if len(name) > HOST_NAME_MAX or not _HOST_NAME.fullmatch(name):
        raise BadRequest(
            f"invalid host name {name!r}: letters, digits, '.', '_' and '-', starting with a "
            f"letter or digit, at most {HOST_NAME_MAX} characters"
        )
    return name
