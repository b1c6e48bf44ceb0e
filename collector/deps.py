"""FastAPI dependencies: the request's session (the request's one commit point) and auth."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from collector.auth import bearer_token
from collector.db import session_scope
from collector.errors import AuthFailed
from collector.services import admin
from collector.settings import Settings


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """The request's one commit point: commit on success, roll back on error."""
    with session_scope(request.app.state.sessionmaker) as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings)]
# scope="function": commit before the response is sent, so a 200 means stored.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def require_admin(request: Request, session: SessionDep) -> None:
    """Admin API and pages: a Bearer admin token, or the signed login cookie of the UI."""
    token = bearer_token(request.headers.get("authorization"))
    if token is not None and admin.is_admin_token(session, token=token):
        return
    if admin.valid_login_cookie(request):
        return
    raise AuthFailed("admin token required")


AdminDep = Annotated[None, Depends(require_admin)]
