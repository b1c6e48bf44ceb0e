"""Errors that carry their HTTP status; one handler in main.py turns them into responses."""

from __future__ import annotations

from collector.sqlite_codes import SQLITE_ERROR, primary_code


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


class ServerFault(AppError):
    """The collector cannot store this request, and will not on a retry either."""

    status_code = 500


class Unavailable(AppError):
    """Not done now, nothing changed: the same request later can succeed (``Retry-After``)."""

    status_code = 503

    def __init__(self, detail: str, *, retry_after_s: int = 1) -> None:
        super().__init__(detail)
        self.headers["Retry-After"] = str(retry_after_s)


def transient(exc: Exception) -> bool:
    """Whether a database error says "not now" (the server down or restarting, a deadlock or
    lock timeout, the disk full or failing, SQLite busy) rather than something the same request
    meets on every try: PostgreSQL's program limits (SQLSTATE class 54: an index row too large,
    too many arguments) and SQLite's SQL errors (SQLITE_ERROR: no such table or column, too
    many SQL variables), each raised as OperationalError too."""
    orig = getattr(exc, "orig", None)
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str):
        return not state.startswith("54")
    return primary_code(orig) != SQLITE_ERROR


def database_error(exc: Exception) -> AppError:
    """A database error as its answer: a transient one ``database_unavailable``'s 503, else a
    500 (which the agent, after a few, answers by splitting the batch to set its bad record
    aside: a 503 it would wait out for good, the host's spool stuck behind the batch)."""
    if transient(exc):
        return database_unavailable()
    return ServerFault("database error; the same request would meet it again")


def database_unavailable() -> Unavailable:
    """A database error that says nothing of the request (the server down or restarting, a
    deadlock, SQLite's disk I/O): the same request later can succeed, so a 503 the agent
    retries, never a 500 that would have it split and set aside the batch's records. The
    driver's words stay in the log: the answer may go out before authentication, and they can
    name the database's host."""
    return Unavailable("database unavailable, nothing stored; send it again")
