"""How `serve` stands behind a proxy: whom it believes about the client's address, and how
long it keeps the proxy's idle connections (docs/deploy.md)."""

from __future__ import annotations

from typing import Any

# Longer than a proxy keeps its idle upstream connections (nginx's `keepalive_timeout`, 60 s by
# default; cloud load balancers' idle timeouts, commonly 60 s). With uvicorn's 5 s the service
# closes an idle connection while the proxy or a client may be sending its next request on it:
# that request fails (a ReadError in the client, a 502 from nginx, which retries no POST).
KEEP_ALIVE_S = 75


def proxy_options() -> dict[str, Any]:
    """uvicorn's options: X-Forwarded-For and X-Forwarded-Proto are applied (the client's
    address becomes the request's, which the sign-in throttle counts) only when the peer is
    a trusted proxy: uvicorn's `FORWARDED_ALLOW_IPS` (comma-separated addresses or networks,
    127.0.0.1 and ::1 when unset). From anyone else they are ignored. Idle connections stay
    open `KEEP_ALIVE_S`."""
    return {"proxy_headers": True, "timeout_keep_alive": KEEP_ALIVE_S}
