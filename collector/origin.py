"""Requests a browser sends with the login cookie must come from the collector's own pages.

SameSite=Lax does not stop a page on another port of the same host (same site, other
origin) from posting to the collector; every cookie-authenticated state change therefore
needs an ``Origin`` (or, without one, a ``Referer``) naming the collector's own origin: the
one the request was addressed to (its ``Host``) or ``FREEZEWATCH_PUBLIC_URL``'s (behind a
proxy). Bearer-token requests are not affected: a browser never adds that header by itself.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` of a URL (default port spelled out), None if it has none."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return None
    if parts.scheme.lower() not in DEFAULT_PORTS or not parts.hostname:
        return None
    return f"{parts.scheme.lower()}://{parts.hostname.lower()}:{port}"


def own_origins(request: Request, public_url: str | None) -> set[str]:
    own = {origin_of(str(request.base_url))}
    if public_url:
        own.add(origin_of(public_url))
    return {o for o in own if o is not None}


def foreign_origin(request: Request, public_url: str | None) -> str | None:
    """Why a state change must be refused (None: it comes from the collector's own page)."""
    claimed = request.headers.get("origin") or request.headers.get("referer")
    if not claimed:
        return "no Origin or Referer header on a request carrying the login cookie"
    if origin_of(claimed) not in own_origins(request, public_url):
        return f"cross-origin request from {claimed[:200]!r} refused"
    return None
