"""Where the UI shows a thing: the page paths that API answers and alerts link to."""

from __future__ import annotations

from urllib.parse import quote

from collector.settings import Settings


def incident_url(incident_id: int) -> str:
    return f"/incidents/{incident_id}"


def host_url(name: str) -> str:
    return f"/hosts/{quote(name, safe='')}"


def matrix_run_url(run_id: int) -> str:
    return f"/matrix/{run_id}"


def absolute(settings: Settings, path: str) -> str:
    """``path`` under the collector's public URL (for links that leave the UI: alerts)."""
    return f"{settings.base_url.rstrip('/')}{path}"
