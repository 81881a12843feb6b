"""Tool runs as operators see them: counted by source and outcome (`/metrics`), and traced
as a span each. A source's tools get a wrapped handler; the wrapped list is kept while the
source returns the same list, so the tool router's memo (by identity) still holds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from controlcenter.observability import tracing
from controlcenter.observability.metrics import TOOL_CALLS
from controlcenter.tools.base import Settings, Tool, ToolContext, ToolHandler
from controlcenter.tools.router import ToolSource


class ObservedSource:
    __slots__ = ("_inner", "_last", "_name")

    def __init__(self, name: str, inner: ToolSource) -> None:
        self._name = name
        self._inner = inner
        self._last: tuple[Sequence[Tool], list[Tool]] | None = None

    async def list_tools(
        self, settings: Settings | None = None, *, location_id: str | None = None
    ) -> Sequence[Tool]:
        tools = await self._inner.list_tools(settings, location_id=location_id)
        last = self._last
        if last is not None and last[0] is tools:
            return last[1]
        wrapped = [_observed(self._name, tool) for tool in tools]
        self._last = (tools, wrapped)
        return wrapped

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


def _observed(source: str, tool: Tool) -> Tool:
    inner: ToolHandler = tool.handler

    async def handler(arguments: dict[str, Any], context: ToolContext) -> Any:
        with tracing.span("tool call", **{"tool.name": tool.name, "tool.source": source}) as span:
            try:
                result = await inner(arguments, context)
            except BaseException as exc:
                TOOL_CALLS.labels(source, "error").inc()
                tracing.fail(span, type(exc).__name__)
                raise
        TOOL_CALLS.labels(source, "ok").inc()
        return result

    # `replace` keeps every other field, `read_only` included: a wrapped read-only tool that
    # came out writing would ask approval under `toolApproval: "writes"`.
    return replace(tool, handler=handler)
