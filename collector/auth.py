"""Who may talk to the collector: per-host agent tokens, the admin token, the UI's login cookie.

Tokens are generated with enough entropy that a plain SHA-256 is the right stored form; only
hashes are kept (the admin token's in ``meta``, each host's on its row).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from fastapi import Request
from itsdangerous import BadSignature, SignatureExpired, TimestampSigner
from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import Host, Meta

ADMIN_KEY = "admin_token_sha256"
COOKIE_SECRET_KEY = "cookie_secret"
COOKIE_NAME = "freezewatch_session"
COOKIE_MAX_AGE_S = 14 * 24 * 3600


def new_token(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, stored_hash: str | None) -> bool:
    return stored_hash is not None and hmac.compare_digest(hash_token(token), stored_hash)


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def scrape_allowed(configured: str | None, authorization: str | None) -> bool:
    """/metrics: open when no metrics token is configured, else only with that bearer token."""
    if not configured:
        return True
    token = bearer_token(authorization)
    return token is not None and hmac.compare_digest(token.encode(), configured.encode())


def host_for_token(session: Session, *, token: str) -> Host | None:
    """The host an agent token belongs to (tokens are unique per host)."""
    return session.scalar(select(Host).where(Host.token_hash == hash_token(token)))


def ensure_admin_token(session: Session, *, configured: str | None) -> str | None:
    """Store the configured admin token, or create one on first start.

    Returns a token to print when one was generated now, else None.
    """
    row = session.get(Meta, ADMIN_KEY)
    if configured:
        if row is None:
            session.add(Meta(key=ADMIN_KEY, value=hash_token(configured)))
        else:
            row.value = hash_token(configured)
        return None
    if row is not None:
        return None
    token = new_token("fwa")
    session.add(Meta(key=ADMIN_KEY, value=hash_token(token)))
    return token


def is_admin_token(session: Session, *, token: str) -> bool:
    row = session.get(Meta, ADMIN_KEY)
    return token_matches(token, row.value if row else None)


def cookie_secret(session: Session) -> str:
    row = session.get(Meta, COOKIE_SECRET_KEY)
    if row is None:
        row = Meta(key=COOKIE_SECRET_KEY, value=secrets.token_urlsafe(32))
        session.add(row)
        session.flush()
    return row.value


def login_cookie_value(secret: str) -> str:
    return TimestampSigner(secret).sign(b"admin").decode()


def valid_login_cookie(request: Request) -> bool:
    value = request.cookies.get(COOKIE_NAME)
    secret = getattr(request.app.state, "cookie_secret", None)
    if not value or not secret:
        return False
    try:
        TimestampSigner(secret).unsign(value, max_age=COOKIE_MAX_AGE_S)
    except (BadSignature, SignatureExpired):
        return False
    return True
