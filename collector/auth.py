"""Who may talk to the collector: per-host agent tokens and the admin token (the UI's login
sessions are ``collector.sessions``).

Tokens are generated with enough entropy that a plain SHA-256 is the right stored form; only
hashes are kept (the admin token's in ``meta``, each host's on its row). A configured admin
token must be as strong (``admin_token_problem``).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from collections import Counter

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from collector.models import Host, Meta, UiSession

ADMIN_KEY = "admin_token_sha256"
# A configured admin token at least this long, with at least this many bits by the Shannon
# estimate of its characters (a 128-bit hex token has ~115; a dictionary word has far less).
ADMIN_TOKEN_MIN_CHARS = 24
ADMIN_TOKEN_MIN_BITS = 96.0
MAKE_ADMIN_TOKEN = """python3 -c 'import secrets; print("fwa_" + secrets.token_urlsafe(32))'"""


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


def admin_token_problem(token: str) -> str | None:
    """Why ``token`` is too weak to be the admin token (None: strong enough)."""
    counts = Counter(token)
    bits = -sum(n * math.log2(n / len(token)) for n in counts.values()) if token else 0.0
    if len(token) < ADMIN_TOKEN_MIN_CHARS:
        why = f"it has {len(token)} characters, at least {ADMIN_TOKEN_MIN_CHARS} are needed"
    elif bits < ADMIN_TOKEN_MIN_BITS:
        why = f"it is too predictable (about {bits:.0f} bits, at least {ADMIN_TOKEN_MIN_BITS:.0f})"
    else:
        return None
    return (
        f"FREEZEWATCH_ADMIN_TOKEN is too weak: {why}. Make one with: {MAKE_ADMIN_TOKEN}"
        " (or leave it unset and the collector generates one on first start)"
    )


def ensure_admin_token(session: Session, *, configured: str | None) -> str | None:
    """Store the configured admin token, or create one on first start; a changed token ends
    every UI session.

    Returns a token to print when one was generated now, else None.
    """
    row = session.get(Meta, ADMIN_KEY)
    if configured:
        if row is None:
            session.add(Meta(key=ADMIN_KEY, value=hash_token(configured)))
        elif row.value != hash_token(configured):
            row.value = hash_token(configured)
            session.execute(delete(UiSession))
        return None
    if row is not None:
        return None
    token = new_token("fwa")
    session.add(Meta(key=ADMIN_KEY, value=hash_token(token)))
    return token


def is_admin_token(session: Session, *, token: str) -> bool:
    row = session.get(Meta, ADMIN_KEY)
    return token_matches(token, row.value if row else None)
