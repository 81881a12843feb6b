"""Errors as values at the HTTP edge: `ApiError` carries the exact status and JSON body."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Raised by routers and dependencies; answered as `{"error": message, **extra}`."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.message, **self.extra}


class InvalidJSONError(Exception):
    """The request body is not parseable JSON (or not UTF-8)."""


class InvalidTextError(ApiError):
    """A string of the body (a key included) holds NUL or a lone surrogate: text no database
    stores and no strict JSON parser reads. Unless a router answers it its own
    way, it is 400 `Validation failed` with `details` naming where."""

    def __init__(self, details: list[dict[str, Any]]) -> None:
        super().__init__(400, "Validation failed", details=details)
        self.details = details


def describe(exc: BaseException) -> str:
    """A failure's type and cause for a log line, without the data involved.

    A database error's own text repeats the statement's parameters (user data, encrypted
    settings); the driver's original message says what went wrong without them.
    """
    cause = getattr(exc, "orig", None) or exc
    return f"{type(exc).__name__}: {cause}"
