"""UI login sessions kept on the server: the cookie holds a random id, the database its hash
and the admin token (hash) it was opened with. Logout deletes the row; a new admin token ends
every session (its rows no longer match; ``auth.ensure_admin_token`` deletes them)."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.orm import Session

from collector.auth import ADMIN_KEY, hash_token
from collector.models import Meta, UiSession

COOKIE_NAME = "freezewatch_session"
MAX_AGE_S = 14 * 24 * 3600


def open_session(session: Session, *, now: datetime) -> str:
    """A new login for the current admin token; returns the cookie value (shown only here).
    Expired sessions are swept on the way."""
    session.execute(delete(UiSession).where(UiSession.expires_at <= now))
    admin = session.get(Meta, ADMIN_KEY)
    assert admin is not None, "the admin token is stored at startup"
    value = secrets.token_urlsafe(32)
    session.add(
        UiSession(
            id_hash=hash_token(value),
            admin_hash=admin.value,
            created_at=now,
            expires_at=now + timedelta(seconds=MAX_AGE_S),
        )
    )
    session.flush()
    return value


def is_valid(session: Session, *, value: str | None, now: datetime) -> bool:
    """The cookie names a live session opened with the current admin token."""
    if not value or len(value) > 128:
        return False
    row = session.get(UiSession, hash_token(value))
    admin = session.get(Meta, ADMIN_KEY)
    return (
        row is not None
        and admin is not None
        and row.expires_at > now
        and secrets.compare_digest(row.admin_hash, admin.value)
    )


def end_session(session: Session, *, value: str | None) -> None:
    """Logout: the cookie's session stops working everywhere, a copy of the cookie included."""
    if value:
        session.execute(delete(UiSession).where(UiSession.id_hash == hash_token(value)))
