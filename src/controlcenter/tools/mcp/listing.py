"""A server's tools as it lists them, and a call's result as the model reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_types import CallToolResult, TextContent

from controlcenter.tools.base import ToolError


@dataclass(frozen=True)
class Listed:
    name: str
    title: str | None
    description: str | None
    schema: dict[str, Any]
    read_only: bool


def listed(tool: Any) -> Listed:
    annotations = getattr(tool, "annotations", None)
    title = getattr(tool, "title", None) or getattr(annotations, "title", None)
    return Listed(
        name=tool.name,
        title=title or None,
        description=tool.description,
        schema=tool.input_schema,
        read_only=read_only_hint(annotations),
    )


def read_only_hint(annotations: Any) -> bool:
    """MCP's `readOnlyHint` (the SDK's `read_only_hint`): only a tool that says it reads only,
    and does not also say it is destructive, is taken as reading only; every other tool asks
    for approval under `toolApproval: "writes"`."""
    if getattr(annotations, "read_only_hint", None) is not True:
        return False
    return getattr(annotations, "destructive_hint", None) is not True


def result_value(result: CallToolResult) -> Any:
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
