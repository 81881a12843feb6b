"""Offered schemas are ones the real APIs accept, whatever the source publishes;
arguments are still checked against the schema as published."""

from __future__ import annotations

import re
from typing import Any

import pytest
from structlog.testing import capture_logs

from controlcenter.crm.tools import crm_tools
from controlcenter.llm.types import ToolInvocation
from controlcenter.tools.base import Settings, Tool, ToolContext
from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.router import MAX_TOOLS, StaticSource, Toolbox, ToolRouter
from controlcenter.tools.schema import offends, offered_schema
from tests.fakes.llm import Invalid, _validate_anthropic_tools, _validate_openai_tools
from tests.fakes.mcp_server import FakeMcp
from tests.tools.test_router import make_tool

CONTEXT = ToolContext(user_id="u1", crm=None)
VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def assert_both_apis_accept(box: Toolbox) -> None:
    """The fakes' own request checks, which refuse what the real APIs refuse."""
    anthropic = [
        {"name": s.name, "description": s.description, "input_schema": s.input_schema}
        for s in box.specs
    ]
    openai = [
        {
            "type": "function",
            "function": {
                "name": s.name,
                "description": s.description,
                "parameters": s.input_schema,
            },
        }
        for s in box.specs
    ]
    try:
        _validate_anthropic_tools(anthropic)
        _validate_openai_tools({"tools": openai})
    except Invalid as exc:  # pragma: no cover - the message is the point of a failure
        pytest.fail(exc.message)


async def test_no_offered_tool_breaks_a_rule(fake_mcp: FakeMcp) -> None:
    """The whole catalogue (the CRM tools and the MCP server's, one with a top-level anyOf)."""

    async def url() -> str:
        return fake_mcp.url

    mcp = McpSource(url, ttl_s=30, timeout_s=5)
    try:
        published = {t.name: t.input_schema for t in await mcp.list_tools()}
        assert "anyOf" in published["schedule_showing"]  # the source really publishes one
        crm_with_combinators = [
            t.name for t in crm_tools() if {"anyOf", "oneOf", "allOf"} & set(t.input_schema)
        ]
        box = await ToolRouter([StaticSource(crm_tools()), mcp]).toolbox()
    finally:
        await mcp.aclose()
    assert len(box.specs) == len(crm_tools()) + len(published)
    assert len(box.specs) <= MAX_TOOLS
    for spec in box.specs:
        assert VALID_NAME.match(spec.name), spec.name
        assert offends(spec.input_schema) is None, (spec.name, offends(spec.input_schema))
    assert len({s.name for s in box.specs}) == len(box.specs)
    assert_both_apis_accept(box)
    offered = {s.name: s.input_schema for s in box.specs}
    for name in [*crm_with_combinators, "schedule_showing"]:
        assert "at least one of" in offered[name]["description"], name


@pytest.mark.parametrize(
    ("published", "offered"),
    [
        (
            {
                "type": "object",
                "properties": {"a": {}, "b": {}},
                "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
            },
            {
                "type": "object",
                "properties": {"a": {}, "b": {}},
                "description": "Give at least one of: a; b.",
            },
        ),
        (
            # A discriminated union, as zod and pydantic publish one.
            {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"kind": {"const": "id"}, "id": {"type": "string"}},
                        "required": ["kind", "id"],
                    },
                    {
                        "type": "object",
                        "properties": {"kind": {"const": "path"}, "path": {"type": "string"}},
                        "required": ["kind", "path"],
                    },
                ],
                "description": "Find a thing.",
            },
            {
                "type": "object",
                "properties": {
                    "kind": {"anyOf": [{"const": "id"}, {"const": "path"}]},
                    "id": {"type": "string"},
                    "path": {"type": "string"},
                },
                "required": ["kind"],
                "description": "Find a thing. Must match exactly one of these schemas: ",
            },
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "allOf": [{"required": ["a"]}, {"properties": {"b": {}}, "required": ["b"]}],
            },
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {}},
                "required": ["a", "b"],
                "description": "Must match all of these schemas: ",
            },
        ),
        ({"properties": {"a": {}}}, {"type": "object", "properties": {"a": {}}}),
        ({"type": ["object", "null"]}, {"type": "object"}),
        (True, {"type": "object"}),
        ({}, {"type": "object"}),
        (
            {"type": "object", "not": {"required": ["x"]}},
            {"type": "object", "description": 'The arguments must not match this schema: {"'},
        ),
        ({"type": "object", "enum": [{}]}, {"type": "object", "description": "must be one of"}),
        # Invalid JSON Schema: both APIs refuse it; an open object is offered instead.
        ({"type": "object", "properties": []}, {"type": "object"}),
        ({"type": "object", "required": "a", "description": "D"}, {"type": "object"}),
    ],
)
def test_shaping(published: Any, offered: dict[str, Any]) -> None:
    shaped = offered_schema(published)
    assert shaped is not None
    assert offends(shaped) is None
    expected_description = offered.pop("description", None)
    description = shaped.pop("description", None)
    if expected_description is None:
        assert description is None or description == "D"
    else:
        assert expected_description in description
    assert shaped == offered


EMAIL_OR_PHONE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
    "anyOf": [{"required": ["email"]}, {"required": ["phone"]}],
}


@pytest.mark.parametrize("published", [{"type": "string"}, {"type": "array"}, False, ["x"]])
def test_a_schema_no_object_satisfies_is_not_offered(published: Any) -> None:
    assert offered_schema(published) is None
    tool = Tool("odd", "", published, make_tool("odd").handler)
    box = Toolbox([tool, make_tool("fine")])
    assert [s.name for s in box.specs] == ["fine"]


async def test_arguments_are_checked_against_the_schema_as_published() -> None:
    ran: list[dict[str, Any]] = []

    async def handler(arguments: dict[str, Any], context: ToolContext) -> Any:
        ran.append(arguments)
        return "booked"

    box = Toolbox([Tool("book", "Book it.", EMAIL_OR_PHONE_SCHEMA, handler)])
    [spec] = box.specs
    assert "anyOf" not in spec.input_schema  # offered without it
    assert "anyOf" in EMAIL_OR_PHONE_SCHEMA  # the published schema is left as it is

    refused = await box.execute(ToolInvocation("c1", "book", {}), CONTEXT)
    assert refused.to_json() == {
        "toolCallId": "c1",
        "success": False,
        "error": "Invalid arguments: Give at least one of: email; phone.",
    }
    wrong_type = await box.execute(ToolInvocation("c2", "book", {"email": 5}), CONTEXT)
    assert wrong_type.error == "Invalid arguments: 5 is not of type 'string' (at email)"
    assert ran == []
    ok = await box.execute(ToolInvocation("c3", "book", {"phone": "+15550100"}), CONTEXT)
    assert ok.success and ran == [{"phone": "+15550100"}]


async def test_a_tool_not_offered_is_logged_once_however_often_its_source_relists() -> None:
    class Relisting:
        async def list_tools(
            self, settings: Settings | None = None, *, location_id: str | None = None
        ) -> list[Tool]:  # fresh
            return [Tool("odd", "", {"type": "string"}, make_tool("odd").handler)]

    router = ToolRouter([Relisting()])
    with capture_logs() as logs:
        for _ in range(3):
            assert (await router.toolbox()).specs == ()
    assert [e["tool"] for e in logs if e["event"].startswith("tool not offered")] == ["odd"]
