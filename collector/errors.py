"""Errors that carry their HTTP status; one handler in main.py turns them into responses."""

from __future__ import annotations


class AppError(Exception):
    status_code = 400

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers: dict[str, str] = {}


class NotFound(AppError):
    status_code = 404


class Conflict(AppError):
    status_code = 409


class AuthFailed(AppError):
    status_code = 401


class Forbidden(AppError):
    status_code = 403


class PayloadTooLarge(AppError):
    status_code = 413


class BadRequest(AppError):
    status_code = 400


class Unprocessable(AppError):
    """Well-formed, but the collector cannot act on it as things stand (e.g. no SSH)."""

    status_code = 422


class Unavailable(AppError):
    """Not done now, nothing changed: the same request later can succeed (``Retry-After``)."""

    status_code = 503

    def __init__(self, detail: str, *, retry_after_s: int = 1) -> None:
        super().__init__(detail)
        self.headers["Retry-After"] = str(retry_after_s)


def database_unavailable(exc: Exception) -> Unavailable:
    """A database error that says nothing of the request (the server down or restarting, a
    deadlock, SQLite's disk I/O): the same request later can succeed, so a 503 the agent
    retries, never a 500 that would have it split and set aside the batch's records."""
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:200]
    return Unavailable(f"database unavailable, nothing stored; send it again ({reason})")
