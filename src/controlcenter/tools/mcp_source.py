"""Tools of the MCP server at the setting `mcpServerUrl`, through the `mcp` client over
streamable HTTP.

The list is cached for `mcp_cache_ttl_s` per URL, failures included, so a server that is down
or slow costs one attempt per TTL instead of one per chat. An unreachable server means "no MCP
tools" (logged), never a failed chat; a failed call is a ToolError, which the router turns
into a failed ToolResult the model can read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mcp import Client
from mcp_types import CallToolResult, TextContent

from controlcenter.logs import get_logger
from controlcenter.tools.base import Tool, ToolContext, ToolError

log = get_logger(__name__)

MCP_SERVER_URL_SETTING = "mcpServerUrl"


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
        self._cached: tuple[str, float, tuple[Tool, ...]] | None = None
        self._lock = asyncio.Lock()

    async def list_tools(self) -> Sequence[Tool]:
        url = (await self._server_url() or "").strip()
        if not url:
            return ()
        cached = self._fresh(url)
        if cached is not None:
            return cached
        async with self._lock:  # one refresh at a time; the others take its result
            cached = self._fresh(url)
            if cached is not None:
                return cached
            tools = await self._fetch(url)
            self._cached = (url, time.monotonic(), tools)
            return tools

    def _fresh(self, url: str) -> tuple[Tool, ...] | None:
        cached = self._cached
        if cached is not None and cached[0] == url and time.monotonic() - cached[1] < self._ttl_s:
            return cached[2]
        return None

    async def _fetch(self, url: str) -> tuple[Tool, ...]:
        try:
            async with asyncio.timeout(self._timeout_s), self._client(url) as client:
                tools: list[Tool] = []
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(
                        self._tool(t.name, t.description, t.input_schema) for t in page.tools
                    )
                    cursor = page.next_cursor
                    if not cursor:
                        return tuple(tools)
        except Exception as exc:
            # The URL may carry credentials: log what failed, not where.
            log.warning("MCP server unavailable; offering no MCP tools", error=_describe(exc))
            return ()

    def _client(self, url: str) -> Client:
        return Client(url, read_timeout_seconds=self._timeout_s, cache=None)

    def _tool(self, name: str, description: str | None, schema: dict[str, Any]) -> Tool:
        async def call(arguments: dict[str, Any], context: ToolContext) -> Any:
            return await self._call(name, arguments)

        return Tool(name=name, description=description or "", input_schema=schema, handler=call)

    async def _call(self, name: str, arguments: dict[str, Any]) -> Any:
        url = (await self._server_url() or "").strip()
        if not url:
            raise ToolError("The MCP server is no longer configured")
        try:
            async with asyncio.timeout(self._timeout_s), self._client(url) as client:
                result = await client.call_tool(name, arguments)
        except Exception as exc:
            log.warning("MCP tool call failed", tool=name, error=_describe(exc))
            raise ToolError(f"MCP server error: {_describe(exc)}") from exc
        return _result_value(result)


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
