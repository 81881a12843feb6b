"""Tools of the configured MCP servers, through the `mcp` client over streamable HTTP.

The servers are the one at the setting `mcpServerUrl` (listed under that name) and the ones an
operator stored (`mcp_store.py`), in that order, the stored ones by name. When a name is
offered twice, the first keeps it (the built-in CRM catalogue comes before every MCP server)
and the later server's tool is offered as `<server>_<tool>` (`tools.router`).

Each server's list is cached for `mcp_cache_ttl_s` per server, address, request headers and
OAuth client (so per broker location for a server whose headers carry it), failures included,
so a server that is down or slow costs one attempt per TTL instead of one per chat. The servers
are listed concurrently. A server that cannot be reached means "none of its tools", never a
failed chat: one log line when it starts failing, one when it answers again. A failed call is
a ToolError, which the router turns into a failed ToolOutcome the model can read. A list fetched
again and found the same as the last one is answered with the last one's objects: the memos
kept by identity downstream (the metrics wrapper, the router's toolbox with its offered schemas
and validators, the providers' request bodies) then hold, where a new list cost a worker ~50 ms
of CPU every TTL.

All MCP traffic goes through one connection pool, below an httpx2 client per address and
headers handed to the SDK's `streamable_http_client`, as its documentation says for headers and
credentials. A server that requires OAuth gets the SDK's client credentials provider as that
client's auth (`mcp_oauth.py`): one provider a server, so its token serves every session.
The pool is one aiohttp transport for httpx2 (`httpx-aiohttp`, the transport the Anthropic and
OpenAI SDKs ship as their `DefaultAioHttpClient`): per tool call it costs the service 15% less
CPU than httpx2's own transport one call at a time and 35% less with twenty at once (measured
against the fake MCP server in a process of its own). Building it once also loads the CA bundle
once, which dominated the event loop under load. One MCP session per server, address and
headers (at most `MAX_SESSIONS`, the least recently used closed first), shared by concurrent
calls, so a call costs one request instead of a connection plus a handshake; a server no
longer in use (deleted or disabled) has its sessions closed and its OAuth provider dropped at
the next listing. A session that fails is dropped and the next call opens a fresh one; a call
that fails because its session was gone before the request ran (connect error, "Session
terminated") is retried once on a fresh session, since the server cannot have run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

import httpx2
from cachetools import TTLCache
from httpx_aiohttp.httpx2 import AiohttpTransport
from mcp import Client
from mcp.client.auth import OAuthFlowError, OAuthTokenError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from controlcenter.admin_settings.names import MCP_SERVER_URL
from controlcenter.admin_settings.usable import OnceReporter, UnusableSettingError, url_problem
from controlcenter.common.logs import get_logger
from controlcenter.tools.base import Settings, Tool, ToolContext, ToolError
from controlcenter.tools.mcp_config import (
    SETTING_SERVER,
    McpServer,
    NeedsLocationError,
    OAuthClient,
)
from controlcenter.tools.mcp_oauth import OAuthProviders
from controlcenter.tools.mcp_store import StoredServer

log = get_logger(__name__)

MCP_SERVER_URL_SETTING = MCP_SERVER_URL
MAX_SESSIONS = 64  # open MCP sessions at most (one per server and broker location in use)
MAX_LISTS = 4096  # cached tool lists at most (one per server and broker location)

_T = TypeVar("_T")


class StoredServers(Protocol):
    """The servers the operator stored (`mcp_store.McpServerStore`)."""

    async def enabled(self) -> Sequence[McpServer]: ...

    async def all(self) -> Sequence[StoredServer]: ...


class _Endpoint(NamedTuple):
    """Which server a request is for, where it goes and the headers it carries, and the OAuth
    client credentials it gets its token with (credentials included: never logged)."""

    server: str
    url: str
    headers: tuple[tuple[str, str], ...]
    oauth: OAuthClient | None


def _endpoint(server: McpServer, location_id: str | None) -> _Endpoint:
    """Raises NeedsLocationError (`McpServer.request_headers`)."""
    return _Endpoint(server.name, server.url, server.request_headers(location_id), server.oauth)


@dataclass(frozen=True)
class _Listed:
    name: str
    title: str | None
    description: str | None
    schema: dict[str, Any]
    read_only: bool


class McpSource:
    def __init__(
        self,
        server_url: Callable[[], Awaitable[str | None]],
        *,
        ttl_s: float,
        timeout_s: float,
        stored: StoredServers | None = None,
    ) -> None:
        """`server_url`: the setting `mcpServerUrl`, read when a call has no settings snapshot;
        `stored`: the servers the operator stored."""
        self._server_url = server_url
        self.stored = stored
        self._timeout_s = timeout_s
        self._cached: TTLCache[_Endpoint, tuple[Tool, ...]] = TTLCache(
            maxsize=MAX_LISTS, ttl=ttl_s, timer=time.monotonic
        )
        self._locks: dict[str, asyncio.Lock] = {}  # per server: one refresh at a time
        self._last: dict[str, tuple[tuple[_Listed, ...], tuple[Tool, ...]]] = {}
        self._merged: tuple[tuple[tuple[Tool, ...], ...], tuple[Tool, ...]] | None = None
        self._transport: AiohttpTransport | None = None
        self._sessions: OrderedDict[_Endpoint, _Session] = OrderedDict()
        self._closed = False
        self._config_errors = OnceReporter()
        self._problems: dict[str, str] = {}  # stored server -> its configuration problem
        self._failing: set[tuple[str, str | None]] = set()  # (server, location) not answering
        self._oauth = OAuthProviders()

    async def aclose(self) -> None:
        """Close the sessions and the connection pool (at shutdown)."""
        self._closed = True
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            await session.aclose()
        if self._transport is not None:
            await self._transport.aclose()
            self._transport = None

    async def list_tools(
        self, settings: Settings | None = None, *, location_id: str | None = None
    ) -> Sequence[Tool]:
        """The tools of every configured server for a broker with `location_id`."""
        servers = await self.servers(settings)
        if not servers:
            return ()
        lists = tuple(await asyncio.gather(*(self._server_tools(s, location_id) for s in servers)))
        return self._merge(servers, lists)

    async def servers(self, settings: Settings | None = None) -> list[McpServer]:
        """The servers to use, in order: the setting's, then the stored ones by name. Those
        no longer in use lose their sessions and OAuth providers here, once the stored ones
        were read (a failed read leaves them)."""
        setting = await self.setting_server(settings)
        servers = [setting] if setting is not None else []
        if self.stored is not None:
            try:
                servers.extend(await self.stored.enabled())
            except Exception as exc:
                log.error(
                    "reading the MCP servers failed; offering none of their tools",
                    error=describe_failure(exc),
                )
                return servers
        self._close_unused({s.name for s in servers})
        return servers

    async def setting_server(self, settings: Settings | None = None) -> McpServer | None:
        """The server at the setting `mcpServerUrl`, None while it is not set."""
        url = await self._url(settings)
        return McpServer(name=SETTING_SERVER, url=url) if url else None

    async def list_now(self, server: McpServer, location_id: str | None) -> tuple[Tool, ...]:
        """The tools the server lists now (no cache), callable like the chat's. Raises what
        the listing raised: NeedsLocationError, ToolError for a configuration problem, the
        client's errors."""
        problem = server.problem()
        if problem is not None:
            raise ToolError(_problem_text(server, problem))
        endpoint = _endpoint(server, location_id)
        return await self._with_session(endpoint, lambda c: self._list_all(server.name, c))

    async def _server_tools(self, server: McpServer, location_id: str | None) -> tuple[Tool, ...]:
        if not self._usable(server):
            return ()
        try:
            endpoint = _endpoint(server, location_id)
        except NeedsLocationError:
            log.info(
                "MCP server needs the broker's CRM location and none is linked; "
                "offering none of its tools",
                server=server.name,
            )
            return ()
        cached = self._cached.get(endpoint)
        if cached is not None:
            return cached
        async with self._locks.setdefault(server.name, asyncio.Lock()):
            cached = self._cached.get(endpoint)
            if cached is not None:
                return cached
            tools = self._cached[endpoint] = await self._fetch(server.name, endpoint, location_id)
            return tools

    def _usable(self, server: McpServer) -> bool:
        """Whether the server's configuration can be used; a problem is logged once."""
        problem = server.problem()
        if server.name == SETTING_SERVER:
            reason = url_problem(server.url)
            if reason is not None:
                # Logged once while it lasts (not per chat); the chats go on without its tools.
                self._config_errors.problem(UnusableSettingError(MCP_SERVER_URL_SETTING, reason))
                return False
            self._config_errors.fine(MCP_SERVER_URL_SETTING)
            return True
        if problem is not None:
            if self._problems.get(server.name) != problem:
                self._problems[server.name] = problem
                log.error("MCP server configuration error", server=server.name, problem=problem)
            return False
        if self._problems.pop(server.name, None) is not None:
            log.info("MCP server configuration error resolved", server=server.name)
        return True

    async def _fetch(
        self, name: str, endpoint: _Endpoint, location_id: str | None
    ) -> tuple[Tool, ...]:
        key = (name, location_id)
        try:
            tools = await self._with_session(endpoint, lambda c: self._list_all(name, c))
        except Exception as exc:
            if key not in self._failing:
                self._failing.add(key)
                # The address or headers may carry credentials: log what failed, not where.
                log.warning(
                    "MCP server unavailable; offering none of its tools",
                    server=name,
                    location_id=location_id,
                    error=describe_failure(exc),
                )
            return ()
        if key in self._failing:
            self._failing.discard(key)
            log.info("MCP server available again", server=name, location_id=location_id)
        return tools

    async def _list_all(self, server: str, client: Client) -> tuple[Tool, ...]:
        listed: list[_Listed] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed.extend(_listed(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        listing = tuple(listed)
        last = self._last.get(server)
        if last is not None and last[0] == listing:
            return last[1]
        tools = tuple(self._tool(server, each) for each in listing)
        self._last[server] = (listing, tools)
        return tools

    def _merge(
        self, servers: Sequence[McpServer], lists: tuple[tuple[Tool, ...], ...]
    ) -> tuple[Tool, ...]:
        """The servers' lists one after the other (the router settles names offered twice);
        the same object while the servers' lists are the same objects."""
        memo = self._merged
        if memo is not None and _same(memo[0], lists):
            return memo[1]
        result = tuple(tool for tools in lists for tool in tools)
        self._merged = (lists, result)
        return result

    async def _with_session(
        self, endpoint: _Endpoint, work: Callable[[Client], Awaitable[_T]]
    ) -> _T:
        """Run `work` on the shared session for `endpoint`, within the timeout."""
        async with asyncio.timeout(self._timeout_s):
            session = self._session_for(endpoint)
            reused = session.opened
            try:
                return await work(await session.client())
            except Exception as exc:
                if isinstance(exc, MCPError) and not _session_gone(exc):
                    raise session.explained(exc) from exc  # the server answered
                self._drop(endpoint, session)
                if not (reused and _session_gone(exc)):
                    raise session.explained(exc) from exc
            session = self._session_for(endpoint)
            try:
                return await work(await session.client())
            except Exception as exc:
                raise session.explained(exc) from exc

    def _session_for(self, endpoint: _Endpoint) -> _Session:
        if self._closed:
            raise RuntimeError("the MCP source is closed")
        session = self._sessions.get(endpoint)
        if session is not None and not session.failed:
            self._sessions.move_to_end(endpoint)
            return session
        if session is not None:
            self._drop(endpoint, session)
        while len(self._sessions) >= MAX_SESSIONS:
            _, oldest = self._sessions.popitem(last=False)
            oldest.close_soon()
        refusals: list[str] = []
        http = self._client(endpoint, refusals)
        session = _Session(endpoint.url, http, self._timeout_s, refusals)
        self._sessions[endpoint] = session
        return session

    def _client(self, endpoint: _Endpoint, refusals: list[str]) -> httpx2.AsyncClient:
        """An HTTP client with the endpoint's headers (and its server's OAuth provider) over the
        one shared pool, noting each refusal's status and message in `refusals` (the SDK answers
        them all as "Server returned an error response"), the authorization server's included.
        It is never closed on its own: closing it would close the pool the others use."""
        if self._transport is None:
            self._transport = AiohttpTransport(
                limits=httpx2.Limits(max_connections=100, max_keepalive_connections=100)
            )

        async def note_refusal(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                await response.aread()
                refusals.append(_refusal_text(response))
                del refusals[:-1]

        return httpx2.AsyncClient(
            headers=dict(endpoint.headers),
            timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
            transport=self._transport,
            event_hooks={"response": [note_refusal]},
            auth=self._oauth.provider(endpoint.server, endpoint.url, endpoint.oauth),
        )

    def _close_unused(self, in_use: set[str]) -> None:
        """The sessions and OAuth providers of servers no longer in use (deleted or disabled)
        are closed and dropped: their credentials and tokens leave the process's memory."""
        for endpoint, session in list(self._sessions.items()):
            if endpoint.server not in in_use:
                self._drop(endpoint, session)
        self._oauth.keep(in_use)

    def _drop(self, endpoint: _Endpoint, session: _Session) -> None:
        if self._sessions.get(endpoint) is session:
            del self._sessions[endpoint]
        session.close_soon()

    def _tool(self, server: str, listed: _Listed) -> Tool:
        name = listed.name

        async def call(arguments: dict[str, Any], context: ToolContext) -> Any:
            return await self._call(server, name, arguments, context)

        return Tool(
            name=name,
            title=listed.title,
            description=listed.description or "",
            input_schema=listed.schema,
            handler=call,
            read_only=listed.read_only,
            origin=server,
        )

    async def _url(self, settings: Settings | None) -> str:
        """The setting's address: from the chat's snapshot when given, else read now."""
        if settings is not None:
            return settings.get(MCP_SERVER_URL_SETTING, "").strip()
        return (await self._server_url() or "").strip()

    async def _call(
        self, server_name: str, name: str, arguments: dict[str, Any], context: ToolContext
    ) -> Any:
        found = [s for s in await self.servers(context.settings) if s.name == server_name]
        if not found:
            raise ToolError("The MCP server is no longer configured")
        server = found[0]
        problem = server.problem()
        if problem is not None:
            raise ToolError(_problem_text(server, problem))
        try:
            endpoint = _endpoint(server, context.location_id)
        except NeedsLocationError as exc:
            raise ToolError(
                f"The MCP server {server.name} needs your CRM location, and none is linked"
            ) from exc

        async def call(client: Client) -> CallToolResult:
            return await client.call_tool(name, arguments)

        try:
            result = await self._with_session(endpoint, call)
        except Exception as exc:
            log.warning(
                "MCP tool call failed", tool=name, server=server_name, error=describe_failure(exc)
            )
            raise ToolError(f"MCP server error: {describe_failure(exc)}") from exc
        return _result_value(result)


class _Session:
    """One MCP session, held open by a task of its own: anyio's cancel scopes inside the
    client must be left by the task that entered them, while calls come from many chats."""

    def __init__(
        self, url: str, http: httpx2.AsyncClient, timeout_s: float, refusals: list[str]
    ) -> None:
        self.url = url
        self.failed = False
        self.refusals = refusals  # the last HTTP refusal, as its client noted it
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
        inner = _innermost(exc)
        if isinstance(inner, OAuthFlowError) and not isinstance(inner, OAuthTokenError):
            return inner
        generic = isinstance(exc, MCPError) and exc.message == _SDK_REFUSAL
        if self.refusals and (generic or not isinstance(exc, MCPError)):
            return RemoteRefusalError(self.refusals[-1])
        return exc

    async def aclose(self) -> None:
        self.close_soon()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._task), 5)
        if not self._task.done():
            self._task.cancel()


def _same(old: Sequence[object], new: Sequence[object]) -> bool:
    return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))


def _problem_text(server: McpServer, problem: str) -> str:
    if server.name == SETTING_SERVER:
        reason = url_problem(server.url) or problem
        return str(UnusableSettingError(MCP_SERVER_URL_SETTING, reason))
    return f"Configuration error: the MCP server {server.name} cannot be used ({problem})"


class RemoteRefusalError(Exception):
    """The server refused with an HTTP error status; the message is its status and text."""


_SDK_REFUSAL = "Server returned an error response"
# No connection was made (the aiohttp transport reports a refused one as ConnectTimeout).
_CONNECT_FAILURES = (httpx2.ConnectError, httpx2.ConnectTimeout)
CANNOT_CONNECT = "cannot connect to the server"
_REFUSAL_CHARS = 300
_ADDRESS = re.compile(r"\S+://\S+")  # an address in an error's text: it may carry credentials


def _refusal_text(response: httpx2.Response) -> str:
    """`HTTP 401 Unauthorized: <the server's message>`, the message from a JSON body's
    `message`, `error_description` or `error`, else the body's text (cut)."""
    text = response.text.strip()
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("message", "error_description", "error"):
            if isinstance(body.get(key), str):
                text = body[key]
                break
    status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
    return f"{status}: {text[:_REFUSAL_CHARS]}" if text else status


def _innermost(exc: BaseException) -> BaseException:
    """The innermost error of anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _session_gone(exc: BaseException) -> bool:
    """Whether the request never reached a live session, so the server cannot have run it."""
    exc = _innermost(exc)
    if isinstance(exc, MCPError):
        return exc.message == "Session terminated"
    return isinstance(exc, _CONNECT_FAILURES)


def _result_value(result: CallToolResult) -> Any:
    """What the model reads: the structured content when the tool returned it, else its text
    (or its content blocks, when some are not text)."""
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if result.is_error:
        raise ToolError("\n".join(texts) or "The MCP tool reported an error")
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [block.model_dump(mode="json", exclude_none=True) for block in result.content]


def describe_failure(exc: BaseException) -> str:
    """A short reason: the innermost error of anyio's exception groups, without addresses."""
    exc = _innermost(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, RemoteRefusalError):
        return str(exc)
    if isinstance(exc, _CONNECT_FAILURES):
        return CANNOT_CONNECT
    if isinstance(exc, OAuthFlowError):
        return "OAuth failed: " + _ADDRESS.sub("<address>", str(exc))
    return type(exc).__name__ + (f": {exc}" if str(exc) and "://" not in str(exc) else "")


def _listed(tool: Any) -> _Listed:
    annotations = getattr(tool, "annotations", None)
    title = getattr(tool, "title", None) or getattr(annotations, "title", None)
    return _Listed(
        name=tool.name,
        title=title or None,
        description=tool.description,
        schema=tool.input_schema,
        read_only=_read_only(annotations),
    )


def _read_only(annotations: Any) -> bool:
    """MCP's `readOnlyHint` (the SDK's `read_only_hint`): only a tool that says it reads only,
    and does not also say it is destructive, is taken as reading only; every other tool asks
    for approval under `toolApproval: "writes"`."""
    if getattr(annotations, "read_only_hint", None) is not True:
        return False
    return getattr(annotations, "destructive_hint", None) is not True
