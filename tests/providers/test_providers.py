"""Both providers through the real SDKs against their loopback fakes: requests in each API's
native form, replies, tool calls and errors as the chat reads them."""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from collections.abc import Callable
from typing import Any

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
from controlcenter.providers import clients
from controlcenter.providers.anthropic import AnthropicProvider
from controlcenter.providers.base import PROVIDER_A, PROVIDER_B, Provider, ProviderError
from controlcenter.providers.registry import build_providers, close_providers
from tests.fakes.llm import (
    ErrorReply,
    FakeAnthropic,
    FakeOpenAI,
    RawReply,
    Received,
    Reply,
    ToolUse,
)
from tests.providers.conftest import fake_of

Case = tuple[Provider, FakeAnthropic | FakeOpenAI]

SEARCH = ToolSpec(
    "crm_search_contacts",
    "Search the broker's contacts",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
TAG = ToolSpec(
    "crm_add_tag",
    "Tag a contact",
    {"type": "object", "properties": {"contactId": {"type": "string"}}},
)


def is_anthropic(fake: FakeAnthropic | FakeOpenAI) -> bool:
    return isinstance(fake, FakeAnthropic)


async def test_text_only_reply(case: Case) -> None:
    provider, fake = case
    fake.script(Reply(text="Hello, broker."))

    reply = await provider.complete(
        api_key=fake.api_key, system="You help brokers.", turns=[UserTurn("Hi")], tools=[]
    )

    assert reply.text == "Hello, broker."
    assert reply.tool_calls == ()
    [body] = fake.requests
    assert "tools" not in body  # OpenAI rejects an empty tools array
    if is_anthropic(fake):
        assert body["model"] == "claude-sonnet-5-5"
        assert body["max_tokens"] == 4096
        assert body["system"] == "You help brokers."
        assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    else:
        assert body["model"] == "gpt-5.5"
        assert body["max_completion_tokens"] == 4096
        assert body["messages"] == [
            {"role": "system", "content": "You help brokers."},
            {"role": "user", "content": "Hi"},
        ]
    assert fake.invalid == []


async def test_blank_system_prompt_is_left_out(case: Case) -> None:
    provider, fake = case
    await provider.complete(api_key=fake.api_key, system="  ", turns=[UserTurn("Hi")], tools=[])
    [body] = fake.requests
    if is_anthropic(fake):
        assert "system" not in body
    else:
        assert [m["role"] for m in body["messages"]] == ["user"]
    assert fake.invalid == []


async def test_one_tool_call(case: Case) -> None:
    provider, fake = case
    fake.script(Reply(tool_uses=[ToolUse("crm_search_contacts", {"query": "Acme"})]))

    reply = await provider.complete(
        api_key=fake.api_key, system="s", turns=[UserTurn("Find Acme")], tools=[SEARCH, TAG]
    )

    assert reply.text == ""
    [call] = reply.tool_calls
    assert call.name == "crm_search_contacts"
    assert call.arguments == {"query": "Acme"}
    assert call.id.startswith("toolu_" if is_anthropic(fake) else "call_")
    [body] = fake.requests
    if is_anthropic(fake):
        assert body["tools"] == [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in (SEARCH, TAG)
        ]
    else:
        assert body["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in (SEARCH, TAG)
        ]
    assert fake.invalid == []


async def test_several_tool_calls_keep_their_order_and_ids(case: Case) -> None:
    provider, fake = case
    fake.script(
        Reply(
            text="Working on it.",
            tool_uses=[
                ToolUse("crm_search_contacts", {"query": "a"}, id="id_1"),
                ToolUse("crm_add_tag", {"contactId": "c2"}, id="id_2"),
                ToolUse("crm_search_contacts", {"query": "c"}, id="id_3"),
            ],
        )
    )

    reply = await provider.complete(
        api_key=fake.api_key, system="s", turns=[UserTurn("Go")], tools=[SEARCH, TAG]
    )

    assert reply.text == "Working on it."
    assert reply.tool_calls == (
        ToolInvocation("id_1", "crm_search_contacts", {"query": "a"}),
        ToolInvocation("id_2", "crm_add_tag", {"contactId": "c2"}),
        ToolInvocation("id_3", "crm_search_contacts", {"query": "c"}),
    )


async def test_history_round_trip_in_native_form(case: Case) -> None:
    """A second call carries the first: user, assistant calls, results, answer, new question."""
    provider, fake = case
    fake.script(
        Reply(
            text="Looking.",
            tool_uses=[
                ToolUse("crm_search_contacts", {"query": "Acme"}),
                ToolUse("crm_add_tag", {"contactId": "c1"}),
            ],
        ),
        Reply(text="Acme is tagged."),
        Reply(text="You're welcome."),
    )
    first = await provider.complete(
        api_key=fake.api_key, system="s", turns=[UserTurn("Tag Acme")], tools=[SEARCH, TAG]
    )
    results = (
        ToolOutcome(first.tool_calls[0].id, True, {"contacts": [{"id": "c1"}]}),
        ToolOutcome(first.tool_calls[1].id, False, error="Tag not found"),
    )
    turns: list[Turn] = [
        UserTurn("Tag Acme"),
        AssistantTurn(first.text, first.tool_calls),
        ToolResultsTurn(results),
    ]
    second = await provider.complete(
        api_key=fake.api_key, system="s", turns=turns, tools=[SEARCH, TAG]
    )
    assert second.text == "Acme is tagged."
    turns += [AssistantTurn(second.text), UserTurn("Thanks")]
    third = await provider.complete(
        api_key=fake.api_key, system="s", turns=turns, tools=[SEARCH, TAG]
    )
    assert third.text == "You're welcome."

    assert fake.invalid == []
    body = fake.requests[2]
    [id1, id2] = [c.id for c in first.tool_calls]
    line1 = f'Tool {id1} result: {{"contacts": [{{"id": "c1"}}]}}'
    line2 = f"Tool {id2} error: Tag not found"
    assert results[0].line() == line1 and results[1].line() == line2
    if is_anthropic(fake):
        assert body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "Tag Acme"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {
                        "type": "tool_use",
                        "id": id1,
                        "name": "crm_search_contacts",
                        "input": {"query": "Acme"},
                    },
                    {
                        "type": "tool_use",
                        "id": id2,
                        "name": "crm_add_tag",
                        "input": {"contactId": "c1"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": id1, "content": line1},
                    {"type": "tool_result", "tool_use_id": id2, "content": line2},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Acme is tagged."}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
        ]
    else:
        assert body["messages"] == [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "Tag Acme"},
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [
                    {
                        "id": id1,
                        "type": "function",
                        "function": {
                            "name": "crm_search_contacts",
                            "arguments": '{"query": "Acme"}',
                        },
                    },
                    {
                        "id": id2,
                        "type": "function",
                        "function": {"name": "crm_add_tag", "arguments": '{"contactId": "c1"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": id1, "content": line1},
            {"role": "tool", "tool_call_id": id2, "content": line2},
            {"role": "assistant", "content": "Acme is tagged."},
            {"role": "user", "content": "Thanks"},
        ]


async def test_blank_text_is_never_sent(case: Case) -> None:
    """Calls without text, empty stored replies and blank user turns: the API accepts all."""
    provider, fake = case
    call = ToolInvocation("call_x1", "crm_search_contacts", {"query": "a"})
    turns: list[Turn] = [
        UserTurn("First"),
        AssistantTurn(""),  # a stored reply with no content
        UserTurn("   "),
        UserTurn("Second"),
        AssistantTurn("", (call,)),
        ToolResultsTurn((ToolOutcome("call_x1", True, []),)),
    ]

    await provider.complete(api_key=fake.api_key, system="s", turns=turns, tools=[SEARCH])

    assert fake.invalid == []
    [body] = fake.requests
    if is_anthropic(fake):
        # Same-role neighbours merge into one message, as the API would merge them.
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert body["messages"][0]["content"] == [
            {"type": "text", "text": "First"},
            {"type": "text", "text": "Second"},
        ]
        assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use"]
    else:
        assert [m["role"] for m in body["messages"]] == [
            "system",
            "user",
            "user",
            "assistant",
            "tool",
        ]
        assert body["messages"][3]["content"] is None
        assert body["messages"][3]["tool_calls"][0]["id"] == "call_x1"


async def test_unanswered_calls_and_stray_results_are_left_out(case: Case) -> None:
    """A history cut short (calls whose results were never stored) still makes a valid request."""
    provider, fake = case
    dangling = ToolInvocation("call_gone", "crm_search_contacts", {"query": "a"})
    turns: list[Turn] = [
        UserTurn("First"),
        AssistantTurn("Let me check.", (dangling,)),
        UserTurn("Never mind"),
        ToolResultsTurn((ToolOutcome("call_stray", True, 1),)),
        UserTurn("Hello?"),
    ]

    reply = await provider.complete(api_key=fake.api_key, system="s", turns=turns, tools=[SEARCH])

    assert reply.text == "OK"
    assert fake.invalid == []
    assert "call_gone" not in str(fake.requests[0])
    assert "call_stray" not in str(fake.requests[0])
    assert "Let me check." in str(fake.requests[0])


async def test_results_are_sent_in_the_order_of_their_calls(case: Case) -> None:
    provider, fake = case
    calls = (
        ToolInvocation("call_a", "crm_search_contacts", {"query": "a"}),
        ToolInvocation("call_b", "crm_search_contacts", {"query": "b"}),
    )
    results = (ToolOutcome("call_b", True, "B"), ToolOutcome("call_a", True, "A"))
    turns: list[Turn] = [UserTurn("Go"), AssistantTurn("", calls), ToolResultsTurn(results)]

    await provider.complete(api_key=fake.api_key, system="s", turns=turns, tools=[SEARCH])

    assert fake.invalid == []
    sent = str(fake.requests[0])
    assert sent.index('Tool call_a result: "A"') < sent.index('Tool call_b result: "B"')


async def test_malformed_tool_arguments_become_an_empty_object(
    providers: dict[str, Provider], fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(
        Reply(
            tool_uses=[
                ToolUse("crm_search_contacts", {}, raw_arguments='{"query": "Ac'),
                ToolUse("crm_add_tag", {}, raw_arguments='"c1"'),
                ToolUse("crm_add_tag", {}, raw_arguments=""),
            ]
        )
    )
    reply = await providers["provider_b"].complete(
        api_key=fake_openai.api_key, system="s", turns=[UserTurn("Go")], tools=[SEARCH, TAG]
    )
    assert [c.arguments for c in reply.tool_calls] == [{}, {}, {}]
    assert [c.name for c in reply.tool_calls] == [
        "crm_search_contacts",
        "crm_add_tag",
        "crm_add_tag",
    ]


# -- errors -------------------------------------------------------------------------------------


async def test_wrong_key_is_401_with_the_api_message_and_never_the_key(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    provider, fake = case
    wrong_key = "sk-wrong-" + "k" * 40 + "WXYZ"
    caplog.set_level(logging.DEBUG)

    with pytest.raises(ProviderError) as caught:
        await provider.complete(api_key=wrong_key, system="s", turns=[UserTurn("Hi")], tools=[])

    error = caught.value
    assert error.status_code == 401
    if is_anthropic(fake):
        assert error.message == "invalid x-api-key"
    else:
        assert error.message.startswith("Incorrect API key provided: [redacted].")
        assert "*" not in error.message
    for text in (error.message, str(error), repr(error), caplog.text):
        assert wrong_key not in text
        assert wrong_key[:12] not in text
    assert error.__suppress_context__  # the SDK exception (which quotes the key) is not shown
    assert fake.invalid == []


@pytest.mark.parametrize(
    ("status", "message"),
    [(429, "Rate limit reached for requests"), (500, "The server had an error")],
)
async def test_http_errors_carry_status_and_api_message(
    case: Case, status: int, message: str
) -> None:
    provider, fake = case
    fake.script(ErrorReply(status, message))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(api_key=fake.api_key, system="s", turns=[UserTurn("Hi")], tools=[])

    assert caught.value.status_code == status
    assert caught.value.message == message
    assert len(fake.requests) == 1  # provider_max_retries=0 in tests


async def test_error_quoting_the_key_is_redacted(case: Case) -> None:
    """Whatever an API or a proxy echoes, the key does not come back out."""
    provider, fake = case
    fake.script(ErrorReply(400, f"Bad header value {fake.api_key} for this endpoint"))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(api_key=fake.api_key, system="s", turns=[UserTurn("Hi")], tools=[])

    assert caught.value.status_code == 400
    assert caught.value.message == "Bad header value [redacted] for this endpoint"


@pytest.mark.parametrize("name", [PROVIDER_A, PROVIDER_B])
async def test_timeout_is_an_error_without_status(
    name: str, llm_config: dict[str, Any], fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    built = build_providers(Config(**llm_config, provider_timeout_s=0.5))
    provider = built[name]
    fake = fake_of(provider, fake_anthropic, fake_openai)
    fake.script(Reply(text="too late", delay_s=1.5))

    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(
                api_key=fake.api_key, system="s", turns=[UserTurn("Hi")], tools=[]
            )
    finally:
        await close_providers(built)

    assert caught.value.status_code is None
    assert caught.value.message == "Request timed out."


@pytest.mark.parametrize(
    "answer",
    [
        RawReply("<html><body>502 Bad Gateway</body></html>"),  # a proxy's page, status 200
        RawReply('{"id": "msg_1", "content": [', content_type="application/json"),  # cut off
        RawReply('["not", "a", "message"]', content_type="application/json"),
    ],
    ids=["html", "cut-off-json", "json-not-an-object"],
)
async def test_an_answer_that_is_not_the_api_s_is_a_clear_error(
    case: Case, answer: RawReply
) -> None:
    """A 200 whose body is not the API's JSON (a gateway in front of it) is a ProviderError
    with a plain message, never an empty reply or a Python error's text."""
    provider, fake = case
    fake.script(answer)

    with pytest.raises(ProviderError) as caught:
        await provider.complete(api_key=fake.api_key, system="s", turns=[UserTurn("Hi")], tools=[])

    assert caught.value.status_code is None
    assert caught.value.message == "The provider's answer could not be read"


async def test_unreachable_server_is_an_error_without_status(unused_port_url: str) -> None:
    providers = build_providers(
        Config(
            provider_a_base_url=unused_port_url,
            provider_b_base_url=unused_port_url + "/v1",
            provider_max_retries=0,
            provider_timeout_s=2,
        )
    )
    try:
        for provider in providers.values():
            with pytest.raises(ProviderError) as caught:
                await provider.complete(
                    api_key="sk-some-key-1234", system="s", turns=[UserTurn("Hi")], tools=[]
                )
            assert caught.value.status_code is None
            assert caught.value.message == "Connection error."
    finally:
        await close_providers(providers)


async def test_sdk_retries_come_from_config(
    llm_config: dict[str, Any], fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    """With provider_max_retries=1 a 500 is retried once, then the retry's answer counts."""
    providers = build_providers(
        Config(**{**llm_config, "provider_max_retries": 1}, provider_timeout_s=5)
    )
    try:
        for provider, fake in (
            (providers["provider_a"], fake_anthropic),
            (providers["provider_b"], fake_openai),
        ):
            fake.script(ErrorReply(500, "boom", headers={"retry-after-ms": "10"}), Reply(text="ok"))
            reply = await provider.complete(
                api_key=fake.api_key, system="s", turns=[UserTurn("Hi")], tools=[]
            )
            assert reply.text == "ok"
            assert len(fake.requests) == 2
    finally:
        await close_providers(providers)


# -- clients ------------------------------------------------------------------------------------


async def test_each_key_is_sent_with_its_calls_over_one_shared_connection_pool(
    case: Case,
) -> None:
    """Each call carries its own key, and the keys' clients share one connection pool: a call
    with another key goes over the connection the previous call left open."""
    provider, fake = case
    own, other = fake.api_key, "sk-other-" + "z" * 30

    with pytest.raises(ProviderError):
        await provider.complete(api_key=other, system="s", turns=[UserTurn("a")], tools=[])
    assert fake.requests == []  # the wrong key was refused before the body was read
    await provider.complete(api_key=own, system="s", turns=[UserTurn("b")], tools=[])
    fake.api_key = other  # the API takes the other key from now on
    try:
        await provider.complete(api_key=other, system="s", turns=[UserTurn("c")], tools=[])
    finally:
        fake.api_key = own
    first, second = fake.received
    assert [_key_sent(first), _key_sent(second)] == [own, other]
    assert first.port == second.port


async def test_calls_past_a_pools_share_open_another_pool_and_never_wait(
    case: Case, llm_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A held call (a model thinking for half a minute) must not make the calls after it wait
    for a connection: with 2 calls per pool, 5 held at once all reach the API before any answer
    (the fake answers none until all 5 have arrived: a capped pool, sending them in waves,
    would never get there and time out); once they end, a call goes through the first pool's
    connections again. The new pools load no CA bundle: all share the provider's TLS context."""
    held, fake = case
    monkeypatch.setattr(clients, "SHARD_CALLS", 2)
    built = build_providers(Config(**llm_config, provider_timeout_s=10))
    provider = built[PROVIDER_A if isinstance(held, AnthropicProvider) else PROVIDER_B]
    hold_until_all_arrived(fake, 5)
    loads = ca_bundle_loads(monkeypatch)

    async def call(i: int) -> str:
        turns = [UserTurn(f"call {i}")]
        reply = await provider.complete(api_key=fake.api_key, system="", turns=turns, tools=[])
        return reply.text

    try:
        assert await asyncio.gather(*(call(i) for i in range(5))) == ["held"] * 5
        ports = {_call_number(received): received.port for received in fake.received}
        assert sorted(ports) == [0, 1, 2, 3, 4] and len(set(ports.values())) == 5
        fake.received.clear()
        assert await call(5) == "held"
        # The first two calls took the first pool, a quiet service's pool.
        assert [received.port for received in fake.received] in ([ports[0]], [ports[1]])
        assert loads == []
    finally:
        await close_providers(built)


async def test_a_pool_keeps_a_connection_for_each_call_it_carries(
    case: Case, llm_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst like the last one opens no connection: each pool kept one for every call it
    carried (a pool keeping fewer closes and opens connections under a load that comes and
    goes: against the real API, a TLS handshake each)."""
    held, fake = case
    monkeypatch.setattr(clients, "SHARD_CALLS", 2)
    built = build_providers(Config(**llm_config, provider_timeout_s=10))
    provider = built[PROVIDER_A if isinstance(held, AnthropicProvider) else PROVIDER_B]
    fake.responder = lambda body: Reply(text="held", delay_s=0.3)

    async def burst() -> set[int]:
        """The client ports (connections) the burst's calls came from."""
        fake.received.clear()
        turns = [UserTurn("call")]
        await asyncio.gather(
            *(
                provider.complete(api_key=fake.api_key, system="", turns=turns, tools=[])
                for _ in range(5)
            )
        )
        return {received.port for received in fake.received}

    try:
        first = await burst()
        assert len(first) == 5
        assert await burst() == first
    finally:
        await close_providers(built)


def _key_sent(received: Received) -> str:
    """The API key a request carried (Anthropic's `x-api-key`, OpenAI's bearer token)."""
    headers = received.headers
    return headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")


def _call_number(received: Received) -> int:
    """The `i` of a request sent by `call(i)` ("call {i}" is its last message)."""
    found = re.search(rb"call (\d+)", received.body)
    assert found is not None
    return int(found[1])


async def test_nothing_to_send_is_an_error_without_a_request(case: Case) -> None:
    provider, fake = case
    with pytest.raises(ProviderError) as caught:
        await provider.complete(
            api_key=fake.api_key, system="s", turns=[UserTurn(" "), AssistantTurn("")], tools=[]
        )
    assert caught.value.status_code is None
    assert caught.value.message == "There is no message to send"
    assert fake.requests == []


async def test_a_call_without_id_gets_one(case: Case) -> None:
    """Some compatible servers send empty ids; results are paired by id, so each gets one."""
    provider, fake = case
    fake.script(
        Reply(tool_uses=[ToolUse("crm_add_tag", {}, id=""), ToolUse("crm_add_tag", {}, id="")])
    )
    reply = await provider.complete(
        api_key=fake.api_key, system="s", turns=[UserTurn("Go")], tools=[TAG]
    )
    ids = [call.id for call in reply.tool_calls]
    assert all(ids) and len(set(ids)) == 2


async def test_many_concurrent_calls_share_the_pool(
    llm_config: dict[str, Any], fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    """Chats wait for the model at the same time: 100 slow calls overlap instead of queueing
    (the fake answers none until all 100 have arrived: calls that queued would time out)."""
    providers = build_providers(Config(**llm_config, provider_timeout_s=20))
    try:
        for name, fake in (("provider_a", fake_anthropic), ("provider_b", fake_openai)):
            hold_until_all_arrived(fake, 100, text=body_text)
            replies = await asyncio.gather(
                *(
                    providers[name].complete(
                        api_key=fake.api_key, system="s", turns=[UserTurn(f"n{i}")], tools=[]
                    )
                    for i in range(100)
                )
            )
            assert [r.text for r in replies] == [f"n{i}" for i in range(100)]
            assert fake.invalid == []
    finally:
        await close_providers(providers)


def body_text(body: dict[str, Any]) -> str:
    """The last user text of a request, in either API's form."""
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else content[-1]["text"]


def ca_bundle_loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each CA bundle a TLS context loads from now on: a spy on the standard library's
    `SSLContext.load_verify_locations`, which passes every call on."""
    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append((args, kwargs))
        load(context, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    return loads


def hold_until_all_arrived(
    fake: FakeAnthropic | FakeOpenAI,
    count: int,
    text: Callable[[dict[str, Any]], str] = lambda body: "held",
) -> None:
    """The fake answers no call until `count` have arrived, then all of them (the responder
    and the wait both run in the fake's own event loop)."""
    arrived: list[object] = []
    all_in = asyncio.Event()

    def responder(body: dict[str, Any]) -> Reply:
        arrived.append(body)
        if len(arrived) == count:
            all_in.set()
        return Reply(text=text(body), delay_s=1.0)

    async def held(seconds: float) -> None:
        await all_in.wait()

    fake.responder, fake.sleep = responder, held
