"""One MCP session to one endpoint (server, address, headers, OAuth client), shared by the
calls of every chat."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import NamedTuple

import httpx2
from mcp import Client
from mcp.client.auth import OAuthFlowError, OAuthTokenError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from controlcenter.tools.mcp.failures import SDK_REFUSAL, RemoteRefusalError, innermost
from controlcenter.tools.mcp.server import McpServer, OAuthClient


class Endpoint(NamedTuple):
    """Which server a request is for, where it goes and the headers it carries, and the OAuth
    client credentials it gets its token with (credentials included: never logged)."""

    server: str
    url: str
    headers: tuple[tuple[str, str], ...]
    oauth: OAuthClient | None


def endpoint_for(server: McpServer, location_id: str | None) -> Endpoint:
    """Raises NeedsLocationError (`McpServer.request_headers`)."""
    return Endpoint(server.name, server.url, server.request_headers(location_id), server.oauth)


@dataclass
class Refusals:
    """What a session's HTTP client noted of the requests refused, which the SDK's errors do not
    say: the last refusal's status and message, and whether a request in the session was answered
    404, which the MCP specification reserves for a session the server no longer knows (the
    client must start a new one). The server's own body decides the SDK's error: a 1.x server's
    `Session not found`, or the SDK's `Session terminated` for a body that is not JSON-RPC."""

    last: str | None = None
    forgotten: bool = False


class Session:
    """One MCP session, held open by a task of its own: anyio's cancel scopes inside the
    client must be left by the task that entered them, while calls come from many chats."""

    def __init__(
        self, url: str, http: httpx2.AsyncClient, timeout_s: float, refusals: Refusals
    ) -> None:
        self.url = url
        self.failed = False
        self.refusals = refusals  # as its client noted them
        self._ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run(http, timeout_s))

    @property
    def opened(self) -> bool:
        return self._ready.done() and not self._ready.cancelled() and not self._ready.exception()

    async def client(self) -> Client:
        # Shielded: one caller's timeout must not cancel the connection the others wait for.
        return await asyncio.shield(self._ready)

    async def _run(self, http: httpx2.AsyncClient, timeout_s: float) -> None:
        transport = streamable_http_client(self.url, http_client=http)
        try:
            async with Client(transport, read_timeout_seconds=timeout_s, cache=None) as client:
                self._ready.set_result(client)
                await self._stop.wait()
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
        finally:
            self.failed = True
            if not self._ready.done():
                self._ready.cancel()

    def close_soon(self) -> None:
        self.failed = True
        self._stop.set()

    def explained(self, exc: Exception) -> Exception:
        """`exc`, or the HTTP refusal behind it when the SDK's error does not say it. An OAuth
        flow that stopped on its own (no refused request is its reason) is kept as it is; a
        refused token request is explained by the authorization server's refusal."""
        inner = innermost(exc)
        if isinstance(inner, OAuthFlowError) and not isinstance(inner, OAuthTokenError):
            return inner
        generic = isinstance(exc, MCPError) and exc.message == SDK_REFUSAL
        if self.refusals.last and (generic or not isinstance(exc, MCPError)):
            return RemoteRefusalError(self.refusals.last)
        return exc

    async def aclose(self) -> None:
        self.close_soon()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._task), 5)
        if not self._task.done():
            self._task.cancel()
