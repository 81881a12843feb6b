"""The tool router: order and cut (priority prefixes first, at most 128), names, execution."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from controlcenter.llm.types import ToolInvocation
from controlcenter.tools.base import Settings, Tool, ToolContext, ToolError
from controlcenter.tools.router import (
    MAX_TOOLS,
    StaticSource,
    ToolRouter,
    order_tools,
    provider_names,
)

CONTEXT = ToolContext(user_id="u1", crm=None)
VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def make_tool(name: str, schema: dict[str, Any] | None = None, handler: Any = None) -> Tool:
    async def default(arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"tool": name, "arguments": arguments, "user": context.user_id}

    return Tool(
        name=name,
        description=f"the {name} tool",
        input_schema=schema or {"type": "object", "properties": {}},
        handler=handler or default,
    )


class CountingSource:
    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = list(tools)
        self.calls = 0

    async def list_tools(
        self, settings: Settings | None = None, *, location_id: str | None = None
    ) -> Sequence[Tool]:
        self.calls += 1
        return self.tools


def test_priority_tools_first_in_original_order_then_the_rest() -> None:
    names = [
        "get_weather",
        "Email_send",
        "listings",
        "contacts_search",
        "LOCATION_info",
        "calendar_events",
        "opportunity_list",
        "conversation_get",
        "my_contact",  # contains a prefix but does not start with one
        "contact_create",
    ]
    ordered = [t.name for t in order_tools([make_tool(n) for n in names])]
    assert ordered == [
        "Email_send",
        "contacts_search",
        "LOCATION_info",
        "calendar_events",
        "opportunity_list",
        "conversation_get",
        "contact_create",
        "get_weather",
        "listings",
        "my_contact",
    ]


async def test_300_tools_are_ordered_and_cut_at_128() -> None:
    tools = []
    for i in range(300):
        prefix = ["other", "contact", "x", "email", "calendar"][i % 5]
        tools.append(make_tool(f"{prefix}_{i:03d}"))
    box = await ToolRouter([StaticSource(tools)]).toolbox()
    names = [spec.name for spec in box.specs]
    priority = [t.name for t in tools if t.name.startswith(("contact", "email", "calendar"))]
    others = [t.name for t in tools if not t.name.startswith(("contact", "email", "calendar"))]
    assert len(priority) == 180
    assert len(names) == MAX_TOOLS == 128
    assert names == priority[:128]
    # With fewer priority tools the others fill the rest, in their original order.
    small = tools[:100] + [make_tool(f"zz_{i}") for i in range(200)]
    names = [s.name for s in (await ToolRouter([StaticSource(small)]).toolbox()).specs]
    small_priority = [t.name for t in small if t.name.startswith(("contact", "email", "calendar"))]
    small_others = [t.name for t in small if t.name not in small_priority]
    assert names == (small_priority + small_others)[:128]
    assert others[0] == "other_000"


async def test_builtin_source_wins_a_name_clash() -> None:
    builtin = make_tool("contact_search")
    clash = make_tool("contact_search")
    extra = make_tool("listing_search")
    router = ToolRouter([StaticSource([builtin]), StaticSource([clash, extra])])
    tools = (await router.toolbox()).tools
    assert [t.name for t in tools] == ["contact_search", "listing_search"]
    assert tools[0] is builtin


def test_provider_names_are_valid_unique_and_keep_valid_names() -> None:
    names = ["mls.search", "mls_search", "ümlaut tool", "a" * 80, "a" * 70, "", "ok-name_1"]
    result = provider_names(names)
    assert all(VALID.match(n) for n in result)
    assert len(set(result)) == len(result)
    assert result[1] == "mls_search"  # a valid name is never renamed
    assert result[0] == "mls_search_2"
    assert result[2] == "_mlaut_tool"
    assert result[3] == "a" * 64
    assert result[4] == "a" * 62 + "_2"
    assert result[5] == "tool"
    assert result[6] == "ok-name_1"


async def test_sanitised_call_is_mapped_back_to_the_original_tool() -> None:
    box = await ToolRouter([StaticSource([make_tool("mls.search")])]).toolbox()
    assert [s.name for s in box.specs] == ["mls_search"]
    call = ToolInvocation(id="c1", name="mls_search", arguments={"city": "Austin"})
    assert box.original(call) == ToolInvocation(
        id="c1", name="mls.search", arguments={"city": "Austin"}
    )
    result = await box.execute(call, CONTEXT)
    assert result.to_json() == {
        "toolCallId": "c1",
        "success": True,
        "result": {"tool": "mls.search", "arguments": {"city": "Austin"}, "user": "u1"},
    }


async def test_unknown_tool_is_a_failed_result() -> None:
    box = await ToolRouter([StaticSource([make_tool("contact_get")])]).toolbox()
    result = await box.execute(ToolInvocation("c9", "nope", {}), CONTEXT)
    assert result.to_json() == {"toolCallId": "c9", "success": False, "error": "Unknown tool: nope"}
    assert result.line() == "Tool c9 error: Unknown tool: nope"


async def test_arguments_are_validated_before_the_handler_runs() -> None:
    ran: list[dict[str, Any]] = []

    async def handler(arguments: dict[str, Any], context: ToolContext) -> Any:
        ran.append(arguments)
        return "ok"

    schema = {
        "type": "object",
        "properties": {"limit": {"type": "integer", "minimum": 1}, "q": {"type": "string"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    box = await ToolRouter([StaticSource([make_tool("contact_search", schema, handler)])]).toolbox()
    missing = await box.execute(ToolInvocation("c1", "contact_search", {}), CONTEXT)
    assert missing.success is False
    assert missing.error == "Invalid arguments: 'q' is a required property"
    wrong = await box.execute(
        ToolInvocation("c2", "contact_search", {"q": "a", "limit": "5"}), CONTEXT
    )
    assert wrong.error == "Invalid arguments: '5' is not of type 'integer' (at limit)"
    extra = await box.execute(ToolInvocation("c3", "contact_search", {"q": "a", "x": 1}), CONTEXT)
    assert extra.success is False and "'x' was unexpected" in (extra.error or "")
    assert ran == []
    good = await box.execute(
        ToolInvocation("c4", "contact_search", {"q": "a", "limit": 2}), CONTEXT
    )
    assert good.to_json() == {"toolCallId": "c4", "success": True, "result": "ok"}
    assert ran == [{"q": "a", "limit": 2}]


async def test_tool_error_and_unexpected_exception_are_failed_results() -> None:
    async def refuses(arguments: dict[str, Any], context: ToolContext) -> Any:
        raise ToolError("Contact 42 does not exist")

    async def crashes(arguments: dict[str, Any], context: ToolContext) -> Any:
        raise RuntimeError("secret internal detail")

    box = await ToolRouter(
        [StaticSource([make_tool("contact_get", handler=refuses), make_tool("x", handler=crashes)])]
    ).toolbox()
    refused = await box.execute(ToolInvocation("a", "contact_get", {}), CONTEXT)
    assert refused.to_json() == {
        "toolCallId": "a",
        "success": False,
        "error": "Contact 42 does not exist",
    }
    crashed = await box.execute(ToolInvocation("b", "x", {}), CONTEXT)
    assert crashed.to_json() == {
        "toolCallId": "b",
        "success": False,
        "error": "Tool x failed unexpectedly",
    }


async def test_a_broken_schema_does_not_block_the_tool() -> None:
    box = await ToolRouter([StaticSource([make_tool("t", {"type": 12})])]).toolbox()
    result = await box.execute(ToolInvocation("c", "t", {"a": 1}), CONTEXT)
    assert result.success is True


async def test_toolbox_is_shared_while_no_source_changes() -> None:
    source = CountingSource([make_tool("a")])
    router = ToolRouter([source])
    first = await router.toolbox()
    assert await router.toolbox() is first
    source.tools = [make_tool("b")]
    second = await router.toolbox()
    assert second is not first
    assert [s.name for s in second.specs] == ["b"]
    assert source.calls == 3


@pytest.mark.parametrize("arguments", [[1, 2], "text", None])
async def test_arguments_that_are_not_an_object_fail(arguments: Any) -> None:
    box = await ToolRouter([StaticSource([make_tool("t")])]).toolbox()
    result = await box.execute(ToolInvocation("c", "t", arguments), CONTEXT)
    assert result.to_json() == {
        "toolCallId": "c",
        "success": False,
        "error": "Invalid arguments: expected a JSON object",
    }
