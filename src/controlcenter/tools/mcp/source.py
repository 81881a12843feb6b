"""Tools of the configured MCP servers, through the `mcp` client over streamable HTTP.

The servers are the one at the setting `mcpServerUrl` (listed under that name) and the ones an
operator stored (`store.py`), in that order, the stored ones by name. When a name is
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
and validators, the providers' request bodies) then hold, instead of being rebuilt every TTL.

All MCP traffic goes through one connection pool, below an httpx2 client per address and headers
handed to the SDK's `streamable_http_client`, as its documentation says for headers and
credentials. A server that requires OAuth gets the SDK's client credentials provider as that
client's auth (`oauth.py`): one provider a server, so its token serves every session. The pool
is one aiohttp transport for httpx2 (`httpx-aiohttp`, the transport the Anthropic and OpenAI
SDKs ship as their `DefaultAioHttpClient`), which costs less CPU per tool call than httpx2's own
transport (`make bench`). Building it once also loads the CA bundle once. One MCP session per
server, address and headers (at most `MAX_SESSIONS`, the least recently used closed first),
shared by concurrent calls, so a call costs one request instead of a connection plus a
handshake; a server no longer in use (deleted or disabled) has its sessions closed and its OAuth
provider dropped at the next listing. A session that fails is dropped and the next call opens a
fresh one; a call that fails because its session was gone before the request ran (connect error,
"Session terminated") is retried once on a fresh session, since the server cannot have run it.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import httpx2
from cachetools import TTLCache
from httpx_aiohttp.httpx2 import AiohttpTransport
from mcp import Client
from mcp.client.streamable_http import MCP_SESSION_ID
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from controlcenter.admin_settings.names import MCP_SERVER_URL
from controlcenter.admin_settings.usable import OnceReporter, UnusableSettingError, url_problem
from controlcenter.common.logs import get_logger
from controlcenter.common.secrets import remote_text
from controlcenter.tools.base import Settings, Tool, ToolContext, ToolError
from controlcenter.tools.mcp.failures import (
    connection_closed,
    describe_failure,
    known_secrets,
    never_connected,
    refusal_text,
)
from controlcenter.tools.mcp.listing import Listed, listed, result_value
from controlcenter.tools.mcp.oauth import OAuthProviders
from controlcenter.tools.mcp.server import SETTING_SERVER, McpServer, NeedsLocationError
from controlcenter.tools.mcp.session import Endpoint, Refusals, Session, endpoint_for
from controlcenter.tools.mcp.store import StoredServer

log = get_logger(__name__)

MCP_SERVER_URL_SETTING = MCP_SERVER_URL
MAX_SESSIONS = 64  # open MCP sessions at most (one per server and broker location in use)
MAX_LISTS = 4096  # cached tool lists at most (one per server and broker location)

_T = TypeVar("_T")


class StoredServers(Protocol):
    """The servers the operator stored (`store.McpServerStore`)."""

    async def enabled(self) -> Sequence[McpServer]: ...

    async def all(self) -> Sequence[StoredServer]: ...


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
        self._cached: TTLCache[Endpoint, tuple[Tool, ...]] = TTLCache(
            maxsize=MAX_LISTS, ttl=ttl_s, timer=time.monotonic
        )
        self._locks: dict[str, asyncio.Lock] = {}  # per server: one refresh at a time
        self._last: dict[str, tuple[tuple[Listed, ...], tuple[Tool, ...]]] = {}
        self._merged: tuple[tuple[tuple[Tool, ...], ...], tuple[Tool, ...]] | None = None
        self._transport: AiohttpTransport | None = None
        self._sessions: OrderedDict[Endpoint, Session] = OrderedDict()
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
        lists = tuple(
            await asyncio.gather(*(self._server_tools(s, location_id, settings) for s in servers))
        )
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
        endpoint = endpoint_for(server, location_id)
        return await self._with_session(
            endpoint, lambda c: self._list_all(server.name, c), repeatable=True
        )

    async def _server_tools(
        self, server: McpServer, location_id: str | None, settings: Settings | None
    ) -> tuple[Tool, ...]:
        if not self._usable(server):
            return ()
        try:
            endpoint = endpoint_for(server, location_id)
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
            tools = await self._fetch(server, endpoint, location_id, settings)
            self._cached[endpoint] = tools
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
        self,
        server: McpServer,
        endpoint: Endpoint,
        location_id: str | None,
        settings: Settings | None,
    ) -> tuple[Tool, ...]:
        name = server.name
        key = (name, location_id)
        try:
            tools = await self._with_session(
                endpoint, lambda c: self._list_all(name, c), repeatable=True
            )
        except Exception as exc:
            if key not in self._failing:
                self._failing.add(key)
                # The address or headers may carry credentials: log what failed, not where.
                log.warning(
                    "MCP server unavailable; offering none of its tools",
                    server=name,
                    location_id=location_id,
                    error=describe_failure(exc, known_secrets(server, settings)),
                )
            return ()
        if key in self._failing:
            self._failing.discard(key)
            log.info("MCP server available again", server=name, location_id=location_id)
        return tools

    async def _list_all(self, server: str, client: Client) -> tuple[Tool, ...]:
        entries: list[Listed] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            entries.extend(listed(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        listing = tuple(entries)
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
        self,
        endpoint: Endpoint,
        work: Callable[[Client], Awaitable[_T]],
        *,
        repeatable: bool,
    ) -> _T:
        """Run `work` on the shared session for `endpoint`, within the timeout. A session that
        fails is dropped, and a reused one's work is run once more on a new session when the
        server cannot have run it (it had forgotten the session: a 404 to a request in it), or
        when the work is `repeatable` (a listing) and the connection closed under it. A tool
        call whose connection closed is never made again, even when another request of the
        session met a 404 meanwhile (a restarted server): the server may have run it."""
        async with asyncio.timeout(self._timeout_s):
            session = self._session_for(endpoint)
            reused = session.opened
            try:
                return await work(await session.client())
            except Exception as exc:
                closed = connection_closed(exc)
                gone = never_connected(exc) or (session.refusals.forgotten and not closed)
                if isinstance(exc, MCPError) and not (gone or closed):
                    raise session.explained(exc) from exc  # the server answered
                self._drop(endpoint, session)
                if not (reused and (gone or (closed and repeatable))):
                    raise session.explained(exc) from exc
            session = self._session_for(endpoint)
            try:
                return await work(await session.client())
            except Exception as exc:
                raise session.explained(exc) from exc

    def _session_for(self, endpoint: Endpoint) -> Session:
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
        refusals = Refusals()
        http = self._client(endpoint, refusals)
        session = Session(endpoint.url, http, self._timeout_s, refusals)
        self._sessions[endpoint] = session
        return session

    def _client(self, endpoint: Endpoint, refusals: Refusals) -> httpx2.AsyncClient:
        """An HTTP client with the endpoint's headers (and its server's OAuth provider) over the
        one shared pool, noting in `refusals` each refusal's status and message (the SDK answers
        them all as "Server returned an error response"), the authorization server's included,
        and a 404 to a request in the session. It is never closed on its own: closing it would
        close the pool the others use."""
        if self._transport is None:
            self._transport = AiohttpTransport(
                limits=httpx2.Limits(max_connections=100, max_keepalive_connections=100)
            )

        async def note_refusal(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                await response.aread()
                refusals.last = refusal_text(response)
                if response.status_code == 404 and MCP_SESSION_ID in response.request.headers:
                    refusals.forgotten = True

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

    def _drop(self, endpoint: Endpoint, session: Session) -> None:
        if self._sessions.get(endpoint) is session:
            del self._sessions[endpoint]
        session.close_soon()

    def _tool(self, server: str, listed: Listed) -> Tool:
        name = listed.name

        async def call(arguments: dict[str, Any], context: ToolContext) -> Any:
            return await self.call_tool(server, name, arguments, context)

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

    async def call_tool(
        self, server_name: str, name: str, arguments: dict[str, Any], context: ToolContext
    ) -> Any:
        """Call tool `name` of the server `server_name` as it is configured now; every failure
        (the server gone, unusable, unreachable, or the tool's own error) is a ToolError whose
        text carries no stored secret."""
        found = [s for s in await self.servers(context.settings) if s.name == server_name]
        if not found:
            raise ToolError("The MCP server is no longer configured")
        server = found[0]
        problem = server.problem()
        if problem is not None:
            raise ToolError(_problem_text(server, problem))
        try:
            endpoint = endpoint_for(server, context.location_id)
        except NeedsLocationError as exc:
            raise ToolError(
                f"The MCP server {server.name} needs your CRM location, and none is linked"
            ) from exc

        async def call(client: Client) -> CallToolResult:
            return await client.call_tool(name, arguments)

        secrets = known_secrets(server, context.settings)
        try:
            result = await self._with_session(endpoint, call, repeatable=False)
        except Exception as exc:
            reason = describe_failure(exc, secrets)
            log.warning("MCP tool call failed", tool=name, server=server_name, error=reason)
            raise ToolError(f"MCP server error: {reason}") from exc
        try:
            return result_value(result)
        except ToolError as exc:
            raise ToolError(remote_text(str(exc), secrets)) from None  # the server's own words


def _same(old: Sequence[object], new: Sequence[object]) -> bool:
    return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))


def _problem_text(server: McpServer, problem: str) -> str:
    if server.name == SETTING_SERVER:
        reason = url_problem(server.url) or problem
        return str(UnusableSettingError(MCP_SERVER_URL_SETTING, reason))
    return f"Configuration error: the MCP server {server.name} cannot be used ({problem})"
