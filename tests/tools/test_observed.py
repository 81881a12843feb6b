"""Observed tool sources (tools/observed.py): the wrapped tools are the source's own but for
their handler."""

from __future__ import annotations

from typing import Any

from controlcenter.tools.base import Tool, ToolContext
from controlcenter.tools.observed import ObservedSource
from controlcenter.tools.router import StaticSource


async def _handler(arguments: dict[str, Any], context: ToolContext) -> Any:
    return arguments


async def test_wrapped_tools_keep_every_field_but_the_handler() -> None:
    tools = [
        Tool("reads", "r", {"type": "object"}, _handler, read_only=True),
        Tool("writes", "w", {"type": "object"}, _handler),
    ]
    wrapped = await ObservedSource("crm", StaticSource(tools)).list_tools()

    for tool, observed in zip(tools, wrapped, strict=True):
        assert observed.handler is not tool.handler
        assert (observed.name, observed.description, observed.input_schema) == (
            tool.name,
            tool.description,
            tool.input_schema,
        )
        assert observed.read_only == tool.read_only  # reads need no approval
    assert await wrapped[0].handler({"a": 1}, ToolContext("u", None)) == {"a": 1}
