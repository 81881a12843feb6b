"""Whom `serve` believes about the client's address (docs/deploy.md)."""

from __future__ import annotations

from typing import Any


def proxy_options() -> dict[str, Any]:
    """uvicorn's options: X-Forwarded-For and X-Forwarded-Proto are applied (the client's
    address becomes the request's, which the sign-in throttle counts) only when the peer is
    a trusted proxy: uvicorn's `FORWARDED_ALLOW_IPS` (comma-separated addresses or networks,
    127.0.0.1 and ::1 when unset). From anyone else they are ignored."""
    return {"proxy_headers": True}
