"""Tools of the MCP server at the setting `mcpServerUrl`, through the `mcp` client over
streamable HTTP.

The list is cached for `mcp_cache_ttl_s` per URL, failures included, so a server that is down
or slow costs one attempt per TTL instead of one per chat. An unreachable server means "no MCP
tools" (logged), never a failed chat; a failed call is a ToolError, which the router turns
into a failed ToolOutcome the model can read. A list fetched again and found the same as the
last one is answered with the last one's objects: the memos kept by identity downstream (the
metrics wrapper, the router's toolbox with its offered schemas and validators, the providers'
request bodies) then hold, where a new list cost a worker ~50 ms of CPU every TTL.

All MCP traffic goes through one long-lived HTTP client (building one loads the CA bundle,
which dominated the event loop under load) and one MCP session per URL, shared by concurrent
calls, so a call costs one request instead of a connection plus a handshake. A session that
fails is dropped and the next call opens a fresh one; a call that fails because its session
was gone before the request ran (connect error, "Session terminated") is retried once on a
fresh session, since the server cannot have run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import httpx2
from cachetools import TTLCache
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from controlcenter.admin_settings.names import MCP_SERVER_URL
from controlcenter.admin_settings.usable import OnceReporter, UnusableSettingError, url_problem
from controlcenter.common.logs import get_logger
from controlcenter.tools.base import Settings, Tool, ToolContext, ToolError

log = get_logger(__name__)

MCP_SERVER_URL_SETTING = MCP_SERVER_URL

_T = TypeVar("_T")


class McpSource:
    def __init__(
        self,
        server_url: Callable[[], Awaitable[str | None]],
        *,
        ttl_s: float,
        timeout_s: float,
    ) -> None:
        self._server_url = server_url
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        # One URL at a time: a new URL evicts the old one's tools.
        self._cached: TTLCache[str, tuple[Tool, ...]] = TTLCache(
            maxsize=1, ttl=ttl_s, timer=time.monotonic
        )
        self._lock = asyncio.Lock()
        self._last: tuple[tuple[Any, ...], tuple[Tool, ...]] | None = None  # (listing, tools)
        self._http: httpx2.AsyncClient | None = None
        self._session: _Session | None = None
        self._closed = False
        self._config_errors = OnceReporter()

    async def aclose(self) -> None:
        """Close the session and the HTTP client (at shutdown)."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.aclose()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def list_tools(self, settings: Settings | None = None) -> Sequence[Tool]:
        url = await self._url(settings)
        if not url:
            return ()
        problem = url_problem(url)
        if problem is not None:
            # Logged once while it lasts (not per chat); the chats go on without MCP tools.
            self._config_errors.problem(UnusableSettingError(MCP_SERVER_URL_SETTING, problem))
            return ()
        self._config_errors.fine(MCP_SERVER_URL_SETTING)
        cached = self._cached.get(url)
        if cached is not None:
            return cached
        async with self._lock:  # one refresh at a time; the others take its result
            cached = self._cached.get(url)
            if cached is not None:
                return cached
            tools = self._cached[url] = await self._fetch(url)
            return tools

    async def count_tools(self) -> int:
        """How many tools the configured server lists now, past the cache: the operator's
        connection test. Raises ToolError with the reason (never the URL) when it cannot."""
        url = await self._url(None)
        problem = url_problem(url) if url else "it is not set"
        if problem is not None:
            raise ToolError(str(UnusableSettingError(MCP_SERVER_URL_SETTING, problem)))
        try:
            return len(await self._with_session(url, self._list_all))
        except Exception as exc:
            raise ToolError(f"MCP server error: {_describe(exc)}") from None

    async def _fetch(self, url: str) -> tuple[Tool, ...]:
        try:
            return await self._with_session(url, self._list_all)
        except Exception as exc:
            # The URL may carry credentials: log what failed, not where.
            log.warning("MCP server unavailable; offering no MCP tools", error=_describe(exc))
            return ()

    async def _list_all(self, client: Client) -> tuple[Tool, ...]:
        listed: list[tuple[str, str | None, dict[str, Any], bool]] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed.extend(
                (t.name, t.description, t.input_schema, _read_only(t)) for t in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                break
        listing = tuple(listed)
        if self._last is not None and self._last[0] == listing:
            return self._last[1]
        tools = tuple(self._tool(*each) for each in listing)
        self._last = (listing, tools)
        return tools

    async def _with_session(self, url: str, work: Callable[[Client], Awaitable[_T]]) -> _T:
        """Run `work` on the shared session for `url`, within the timeout."""
        async with asyncio.timeout(self._timeout_s):
            session = self._session_for(url)
            reused = session.opened
            try:
                return await work(await session.client())
            except Exception as exc:
                if isinstance(exc, MCPError) and not _session_gone(exc):
                    raise  # the server answered: the session is fine
                self._drop(session)
                if not (reused and _session_gone(exc)):
                    raise
            return await work(await self._session_for(url).client())

    def _session_for(self, url: str) -> _Session:
        if self._closed:
            raise RuntimeError("the MCP source is closed")
        session = self._session
        if session is not None and session.url == url and not session.failed:
            return session
        if session is not None:
            self._drop(session)
        if self._http is None:
            self._http = httpx2.AsyncClient(
                timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                limits=httpx2.Limits(max_connections=100, max_keepalive_connections=100),
            )
        self._session = _Session(url, self._http, self._timeout_s)
        return self._session

    def _drop(self, session: _Session) -> None:
        if self._session is session:
            self._session = None
        session.close_soon()

    def _tool(
        self, name: str, description: str | None, schema: dict[str, Any], read_only: bool
    ) -> Tool:
        async def call(arguments: dict[str, Any], context: ToolContext) -> Any:
            return await self._call(name, arguments, context.settings)

        return Tool(
            name=name,
            description=description or "",
            input_schema=schema,
            handler=call,
            read_only=read_only,
        )

    async def _url(self, settings: Settings | None) -> str:
        """The server's address: from the chat's snapshot when given, else read now."""
        if settings is not None:
            return settings.get(MCP_SERVER_URL_SETTING, "").strip()
        return (await self._server_url() or "").strip()

    async def _call(self, name: str, arguments: dict[str, Any], settings: Settings | None) -> Any:
        url = await self._url(settings)
        if not url:
            raise ToolError("The MCP server is no longer configured")
        problem = url_problem(url)
        if problem is not None:
            raise ToolError(str(UnusableSettingError(MCP_SERVER_URL_SETTING, problem)))

        async def call(client: Client) -> CallToolResult:
            return await client.call_tool(name, arguments)

        try:
            result = await self._with_session(url, call)
        except Exception as exc:
            log.warning("MCP tool call failed", tool=name, error=_describe(exc))
            raise ToolError(f"MCP server error: {_describe(exc)}") from exc
        return _result_value(result)


class _Session:
    """One MCP session, held open by a task of its own: anyio's cancel scopes inside the
    client must be left by the task that entered them, while calls come from many chats."""

    def __init__(self, url: str, http: httpx2.AsyncClient, timeout_s: float) -> None:
        self.url = url
        self.failed = False
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

    async def aclose(self) -> None:
        self.close_soon()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._task), 5)
        if not self._task.done():
            self._task.cancel()


def _session_gone(exc: BaseException) -> bool:
    """Whether the request never reached a live session, so the server cannot have run it."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.message == "Session terminated"
    return isinstance(exc, httpx2.ConnectError)


def _result_value(result: CallToolResult) -> Any:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if result.is_error:
        raise ToolError("\n".join(texts) or "The MCP tool reported an error")
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [block.model_dump(mode="json", exclude_none=True) for block in result.content]


def _describe(exc: BaseException) -> str:
    """A short reason: the innermost error of anyio's exception groups, without addresses."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "timed out"
    return type(exc).__name__ + (f": {exc}" if str(exc) and "://" not in str(exc) else "")


def _read_only(tool: Any) -> bool:
    """MCP's `readOnlyHint`: only a tool that says it reads only is taken as reading only."""
    annotations = getattr(tool, "annotations", None)
    return getattr(annotations, "read_only_hint", None) is True  # the SDK's name for it
