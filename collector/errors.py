"""Errors that carry their HTTP status; one handler in main.py turns them into responses."""

from __future__ import annotations


class AppError(Exception):
    status_code = 400

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


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
