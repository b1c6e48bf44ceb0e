"""``add-host``'s repeatable KEY=VALUE arguments as the changes the API's PATCH takes."""

from __future__ import annotations

from collector.errors import BadRequest


def retain(specs: list[str]) -> dict[str, float | None]:
    """``--retain KIND=DAYS``; ``KIND=`` returns the kind to the default."""
    try:
        return {k: float(d) if d else None for k, _, d in (s.partition("=") for s in specs)}
    except ValueError:
        raise BadRequest(f"--retain takes KIND=DAYS, not {specs}") from None


def labels(specs: list[str]) -> dict[str, str | None]:
    """``--label KEY=VALUE``; ``KEY=`` removes the label."""
    if any("=" not in spec for spec in specs):
        raise BadRequest(f"--label takes KEY=VALUE (KEY= removes it), not {specs}")
    return {k.strip(): v.strip() or None for k, _, v in (s.partition("=") for s in specs)}
