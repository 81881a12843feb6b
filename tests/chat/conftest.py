from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from controlcenter.tools.base import Tool, ToolContext
from controlcenter.tools.router import StaticSource
from tests.chat.helpers import Llm, set_settings
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.llm import FakeAnthropic, FakeOpenAI


@pytest.fixture(autouse=True)
def without_builtin_tools(server: RunningServer) -> Iterator[None]:
    """The chat tests offer only the tools they register (and the MCP server's): the built-in
    CRM catalogue is set aside here and exercised by tests/integration."""
    sources = server.tools.sources
    builtin = sources.pop(0)
    yield
    sources.insert(0, builtin)


@pytest.fixture(params=["provider_a", "provider_b"])
def llm(
    request: pytest.FixtureRequest, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> Iterator[Llm]:
    """Each end-to-end test runs once per provider; none may send a request the API rejects."""
    if request.param == "provider_a":
        current = Llm("provider_a", fake_anthropic, "providerAApiKey")
    else:
        current = Llm("provider_b", fake_openai, "providerBApiKey")
    yield current
    assert current.fake.invalid == []


@pytest.fixture
async def user(server: RunningServer, users: UserFactory, llm: Llm) -> AppUser:
    """A user, with the key of the provider under test configured."""
    created = await users.create()
    await set_settings(server, {llm.setting: llm.fake.api_key}, created)
    return created


class ToolLog:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []


@pytest.fixture
def tool_log() -> ToolLog:
    return ToolLog()


def recording_tool(name: str, log: ToolLog, schema: dict[str, Any] | None = None) -> Tool:
    async def handler(arguments: dict[str, Any], context: ToolContext) -> Any:
        log.calls.append((name, arguments, context.user_id))
        if name == "contact_explode":
            raise RuntimeError("boom")
        return {"tool": name, "echo": arguments}

    return Tool(
        name=name,
        description=f"Test tool {name}.",
        input_schema=schema or {"type": "object", "properties": {"q": {"type": "string"}}},
        handler=handler,
    )


@pytest.fixture
async def register_tools(server: RunningServer) -> AsyncIterator[Any]:
    """`register_tools([...])` adds a test source to the running service for this test."""
    added: list[StaticSource] = []

    def register(tools: list[Tool]) -> None:
        source = StaticSource(tools)
        server.tools.sources.append(source)
        added.append(source)

    yield register
    for source in added:
        server.tools.sources.remove(source)


@pytest.fixture
async def both_keys(
    server: RunningServer,
    users: UserFactory,
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
) -> AppUser:
    """A user with both providers' keys set (the fallback's tests)."""
    user = await users.create()
    keys = {"providerAApiKey": fake_anthropic.api_key, "providerBApiKey": fake_openai.api_key}
    await set_settings(server, keys, user)
    return user
