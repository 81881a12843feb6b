"""`complete` posts a pre-encoded body through the SDK's low-level `post` (docs/providers.md,
"Request bodies"): what reaches the API must be exactly what the SDK's own `create` sends, with
the SDK's retries and error handling intact."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import openai
import pytest

from controlcenter.config import Config
from controlcenter.llm.types import (
    AssistantTurn,
    ToolInvocation,
    ToolOutcome,
    ToolResultsTurn,
    ToolSpec,
    Turn,
    UserTurn,
)
from controlcenter.providers.anthropic import AnthropicProvider
from controlcenter.providers.base import PROVIDER_A, PROVIDER_B, Provider, ProviderError
from controlcenter.providers.body import Body, BodyCache, Fixed
from controlcenter.providers.openai import OpenAIProvider
from controlcenter.providers.registry import build_providers, close_providers
from tests.fakes.llm import ErrorReply, FakeAnthropic, FakeOpenAI, Reply
from tests.providers.conftest import TIMEOUT_S

Case = tuple[Provider, FakeAnthropic | FakeOpenAI]

SYSTEM = "You help brokers. Ünïcödé stays as it is."
SEARCH = ToolSpec(
    "crm_search_contacts",
    "Search the broker's contacts",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
TAG = ToolSpec("crm_add_tag", "Tag a contact", {"type": "object", "properties": {}})
CALL = ToolInvocation("toolu_1", "crm_search_contacts", {"query": "Smith"})
TURNS: list[Turn] = [
    UserTurn("Find the Smiths"),
    AssistantTurn("Looking.", (CALL,)),
    ToolResultsTurn((ToolOutcome("toolu_1", True, {"contacts": ["Ann Smith"]}),)),
]


def expected_body(fake: FakeAnthropic | FakeOpenAI) -> dict[str, Any]:
    """Every field of the body, in the order `create` writes them."""
    if isinstance(fake, FakeAnthropic):
        return {
            "max_tokens": 4096,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Find the Smiths"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Looking."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": CALL.name,
                            "input": CALL.arguments,
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": 'Tool toolu_1 result: {"contacts": ["Ann Smith"]}',
                        }
                    ],
                },
            ],
            "model": "claude-sonnet-5-5",
            "system": SYSTEM,
            "tools": [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in (SEARCH, TAG)
            ],
        }
    return {
        "model": "gpt-5.5",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Find the Smiths"},
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {"name": CALL.name, "arguments": '{"query": "Smith"}'},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "toolu_1",
                "content": 'Tool toolu_1 result: {"contacts": ["Ann Smith"]}',
            },
        ],
        "max_completion_tokens": 4096,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in (SEARCH, TAG)
        ],
    }


@asynccontextmanager
async def sdk_client(
    fake: FakeAnthropic | FakeOpenAI,
) -> AsyncIterator[anthropic.AsyncAnthropic | openai.AsyncOpenAI]:
    """The SDK's own client for the fake's key, configured as the deployment configures the
    provider (its base URL, timeout and retries, over the SDK's aiohttp transport)."""
    options: dict[str, Any] = {
        "api_key": fake.api_key,
        "base_url": fake.url,
        "timeout": TIMEOUT_S,
        "max_retries": 0,
    }
    client: anthropic.AsyncAnthropic | openai.AsyncOpenAI
    if isinstance(fake, FakeAnthropic):
        client = anthropic.AsyncAnthropic(**options, http_client=anthropic.DefaultAioHttpClient())
    else:
        client = openai.AsyncOpenAI(**options, http_client=openai.DefaultAioHttpClient())
    async with client:
        yield client


async def create(fake: FakeAnthropic | FakeOpenAI, body: dict[str, Any]) -> None:
    """The same request through the SDK's own `create`."""
    async with sdk_client(fake) as client:
        if isinstance(client, anthropic.AsyncAnthropic):
            await client.messages.create(**body)
        else:
            await client.chat.completions.create(**body)


async def test_the_request_is_byte_for_byte_the_one_create_sends(case: Case) -> None:
    provider, fake = case
    await provider.complete(api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=(SEARCH, TAG))
    body = expected_body(fake)
    await create(fake, body)

    ours, theirs = fake.received
    assert json.loads(ours.body) == body
    assert list(json.loads(ours.body)) == list(body)  # the same keys in the same order
    assert ours.body == theirs.body
    assert ours.headers == theirs.headers  # auth, version, content type, retry count, ...
    assert fake.invalid == []


async def stream_with_sdk(fake: FakeAnthropic | FakeOpenAI, body: dict[str, Any]) -> list[str]:
    """The same request through the SDK's own streaming helper; the text pieces it read."""
    pieces: list[str] = []
    async with sdk_client(fake) as client:
        if isinstance(client, anthropic.AsyncAnthropic):
            async with client.messages.stream(**body) as stream:
                pieces += [text async for text in stream.text_stream]
        else:
            chunks = await client.chat.completions.create(
                **body, stream=True, stream_options={"include_usage": True}
            )
            async for chunk in chunks:
                pieces += [c.delta.content for c in chunk.choices if c.delta.content]
    return pieces


async def test_a_streamed_request_is_byte_for_byte_the_one_the_sdk_helper_sends(
    case: Case,
) -> None:
    """`stream` posts its pre-encoded body as `messages.stream` / `create(stream=True)` would:
    the same bytes and headers, and the SDK's event stream reads the same reply."""
    provider, fake = case
    assert isinstance(provider, AnthropicProvider | OpenAIProvider)
    fake.script(Reply(text="Two Smiths found."), Reply(text="Two Smiths found."))
    pieces: list[str] = []
    reply = await provider.stream(
        api_key=fake.api_key,
        system=SYSTEM,
        turns=TURNS,
        tools=(SEARCH, TAG),
        on_text=pieces.append,
    )
    theirs_pieces = await stream_with_sdk(fake, expected_body(fake))

    ours, theirs = fake.received
    assert json.loads(ours.body)["stream"] is True
    assert ours.body == theirs.body
    assert list(json.loads(ours.body)) == list(json.loads(theirs.body))
    assert ours.headers == theirs.headers
    assert reply.text == "Two Smiths found." == "".join(pieces)
    assert pieces == theirs_pieces
    assert fake.invalid == []


async def test_the_headers_the_api_needs(case: Case) -> None:
    provider, fake = case
    await provider.complete(api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=(SEARCH,))
    [received] = fake.received
    headers = received.headers
    assert headers["content-type"] == "application/json"
    assert headers["authorization"] == f"Bearer {fake.api_key}"
    assert headers["x-stainless-retry-count"] == "0"
    assert headers["content-length"] == str(len(received.body))
    if isinstance(fake, FakeAnthropic):
        # The SDK's own API version (a date); the test above checks it is create's.
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", headers["anthropic-version"])
    else:
        assert "anthropic-version" not in headers
    assert received.body.decode().count(SYSTEM) == 1  # UTF-8 as is, not \\u-escaped


async def test_each_call_sends_its_own_messages_over_one_encoded_tool_list(case: Case) -> None:
    provider, fake = case
    tools = (SEARCH, TAG)
    await provider.complete(api_key=fake.api_key, system=SYSTEM, turns=TURNS[:1], tools=tools)
    await provider.complete(api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=tools)
    first, second = fake.requests
    assert len(second["messages"]) > len(first["messages"])
    assert first["tools"] == second["tools"] == expected_body(fake)["tools"]
    assert fake.invalid == []


async def test_another_tool_list_or_a_changed_list_is_sent_as_it_is_now(case: Case) -> None:
    """Only a tuple is recognised by identity; a new tuple, or a list changed in place, is
    encoded again."""
    provider, fake = case
    await provider.complete(api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=(SEARCH,))
    await provider.complete(api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=(SEARCH, TAG))
    listed = [SEARCH]
    await provider.complete(api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=listed)
    listed.append(TAG)
    await provider.complete(api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=listed)
    await provider.complete(api_key=fake.api_key, system="Other.", turns=TURNS, tools=(SEARCH,))

    def names(body: dict[str, Any]) -> list[str]:
        return [t.get("name") or t["function"]["name"] for t in body["tools"]]

    assert [names(body) for body in fake.requests] == [
        [SEARCH.name],
        [SEARCH.name, TAG.name],
        [SEARCH.name],
        [SEARCH.name, TAG.name],
        [SEARCH.name],
    ]
    last = fake.requests[-1]
    system = last["system"] if isinstance(fake, FakeAnthropic) else last["messages"][0]["content"]
    assert system == "Other."


@pytest.fixture
async def retrying(
    llm_config: dict[str, Any], fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> AsyncIterator[list[Case]]:
    """Both providers with provider_max_retries=2 (the tests' own default is 0), each with its
    fake."""
    providers = build_providers(
        Config(**{**llm_config, "provider_max_retries": 2}, provider_timeout_s=5)
    )
    yield [(providers[PROVIDER_A], fake_anthropic), (providers[PROVIDER_B], fake_openai)]
    await close_providers(providers)


def overloaded(message: str) -> ErrorReply:
    return ErrorReply(529, message, headers={"retry-after-ms": "10"})


@pytest.mark.parametrize("status", [500, 529])
async def test_the_sdk_still_retries_the_same_bytes(retrying: list[Case], status: int) -> None:
    """Two failures, then the third attempt's answer; every attempt carries the same body and
    the SDK's retry count."""
    for provider, fake in retrying:
        failure = ErrorReply(status, "Overloaded", headers={"retry-after-ms": "10"})
        fake.script(failure, failure, Reply(text="ok"))
        reply = await provider.complete(
            api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=(SEARCH, TAG)
        )
        assert reply.text == "ok"
        assert [r.headers["x-stainless-retry-count"] for r in fake.received] == ["0", "1", "2"]
        assert len({r.body for r in fake.received}) == 1
        assert fake.invalid == []


async def test_retries_used_up_give_the_status_and_never_the_key(retrying: list[Case]) -> None:
    for provider, fake in retrying:
        fake.script(*[overloaded(f"Overloaded for {fake.api_key}")] * 3)
        with pytest.raises(ProviderError) as caught:
            await provider.complete(
                api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=(SEARCH,)
            )
        assert caught.value.status_code == 529
        assert caught.value.message == "Overloaded for [redacted]"
        assert fake.api_key not in str(caught.value)
        assert caught.value.__suppress_context__
        assert len(fake.received) == 3


async def test_the_reply_is_the_sdks_parsed_model(case: Case) -> None:
    """`post` parses the reply into the same SDK model `create` returns (cast_to)."""
    provider, fake = case
    fake.script(Reply(text="Two Smiths.", usage=(120, 7)))
    reply = await provider.complete(api_key=fake.api_key, system=SYSTEM, turns=TURNS, tools=())
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("Two Smiths.", 120, 7)
    assert "tools" not in fake.requests[0]


# -- the cache of fixed parts -------------------------------------------------------------------


def counting() -> tuple[BodyCache, list[Sequence[ToolSpec]]]:
    built: list[Sequence[ToolSpec]] = []

    def build(system: str, tools: Sequence[ToolSpec]) -> Fixed:
        built.append(tools)
        body = Body.around({"system": system}, {"n": len(tools)})
        return Fixed(body, body)

    return BodyCache(build, size=2), built


def test_a_tuple_is_encoded_once_a_list_every_time() -> None:
    cache, built = counting()
    tools = (SEARCH, TAG)
    assert cache.get("s", tools) is cache.get("s", tools)
    assert len(built) == 1
    cache.get("other", tools)  # the system prompt is part of the fixed parts
    assert len(built) == 2
    listed = [SEARCH]
    cache.get("s", listed)
    cache.get("s", listed)
    assert len(built) == 4


def test_the_cache_is_bounded() -> None:
    cache, built = counting()
    lists = [(SEARCH,), (TAG,), (SEARCH, TAG)]
    for tools in lists:
        cache.get("s", tools)
    cache.get("s", lists[0])  # pushed out by the third: encoded again
    assert len(built) == 4


def test_body_around_writes_the_keys_in_order() -> None:
    body = Body.around({"a": 1}, {"z": "é", "b": [1]})
    assert bytes(body.with_messages([{"role": "user"}])) == (
        '{"a":1,"messages":[{"role":"user"}],"z":"é","b":[1]}'.encode()
    )
    assert bytes(Body.around({}, {}).with_messages([])) == b'{"messages":[]}'
    with pytest.raises(ValueError):
        Body.around({}, {}).with_messages([float("nan")])  # as the SDKs: allow_nan=False


async def test_a_call_holds_the_shared_parts_never_a_joined_copy() -> None:
    """A call in flight keeps its body for the SDK's retries: the fixed parts are the cached
    objects themselves, and each pass over the body sends all of it again."""
    fixed = Body.around({"a": 1}, {"tools": ["x" * 1000]})
    body = fixed.with_messages([{"role": "user"}])
    assert len(body.parts) == 2 and body.parts[1] is fixed.tail  # the tool list, shared
    joined = b'{"a":1,"messages":[{"role":"user"}],"tools":["' + b"x" * 1000 + b'"]}'
    assert bytes(body) == joined
    assert body.headers == {"Content-Length": str(len(joined))}
    for _ in range(2):
        assert b"".join([part async for part in body]) == joined
