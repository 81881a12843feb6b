"""Whether an HTTP request over the aiohttp transport (`httpx-aiohttp`, under the CRM's and the
MCP servers' clients) failed before it had a connection, so that it cannot have reached the
server.

The transport reports every aiohttp connection error as httpx's `ConnectTimeout`, a connection
the server closed after the request was sent included; the aiohttp exception it was raised from
says which it was."""

from __future__ import annotations

import aiohttp


def unconnected(exc: BaseException) -> str | None:
    """`could not connect` (refused, unreachable, a proxy's refusal) or `timed out connecting`
    when no connection was made for the request; None when one was (the request may have been
    sent), or when `exc` is not the transport's."""
    cause = exc.__cause__
    if isinstance(cause, aiohttp.ConnectionTimeoutError):
        return "timed out connecting"
    if isinstance(cause, aiohttp.ClientConnectorError):
        return "could not connect"
    return None
