"""The throttle's refusal as an HTTP answer, for the routers and the index."""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from controlcenter.auth.throttle import TOO_MANY_ATTEMPTS, TooManyAttemptsError


def too_many_attempts(exc: TooManyAttemptsError) -> JSONResponse:
    return JSONResponse(
        {"error": TOO_MANY_ATTEMPTS},
        status_code=429,
        headers={"Retry-After": str(exc.retry_after_s)},
    )


def client_address(connection: HTTPConnection) -> str | None:
    """The address the throttle counts against: the peer, or the client a trusted proxy names
    (`controlcenter serve` runs uvicorn with `proxy_headers`)."""
    return connection.client.host if connection.client else None
