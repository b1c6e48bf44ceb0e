"""Host liveness as seen from the collector's clock."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from collector.models import Host


def record_heartbeat(
    session: Session, *, host: Host, boot_id: str, now: datetime, grace_s: float
) -> None:
    """Every accepted batch is a heartbeat: push the host's overdue time forward."""
    host.last_seen_at = now
    host.overdue_at = now + timedelta(seconds=host.grace_s or grace_s)
    host.current_boot_id = boot_id
    if host.status != "up":
        host.status = "up"
        host.status_since = now
