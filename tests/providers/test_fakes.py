"""The fakes are not rubber stamps: raw requests the real APIs reject are rejected, and recorded."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.fakes.clock import ManualClock
from tests.fakes.llm import ErrorReply, FakeAnthropic, FakeOpenAI, Reply, ToolUse


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5) as client:
        yield client


def anthropic_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-5-5", "max_tokens": 100, "messages": messages, **extra}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id_: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": "crm_search", "input": {}}


def tool_result(id_: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id_, "content": f"Tool {id_} result: 1"}


def anthropic_tool(schema: dict[str, Any], name: str = "crm_search") -> dict[str, Any]:
    return {"name": name, "description": "d", "input_schema": schema}


async def post_anthropic(
    http: httpx.AsyncClient, fake: FakeAnthropic, body: dict[str, Any]
) -> httpx.Response:
    return await http.post(
        fake.url + "/v1/messages",
        json=body,
        headers={"x-api-key": fake.api_key, "anthropic-version": "2023-06-01"},
    )


async def test_anthropic_accepts_a_valid_tool_exchange(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(Reply(text="Done"))
    body = anthropic_body(
        [
            user(text("Find Acme")),
            assistant(text("Looking"), tool_use("toolu_1")),
            user(tool_result("toolu_1")),
        ],
        system="s",
        tools=[{"name": "crm_search", "description": "d", "input_schema": {"type": "object"}}],
    )
    response = await post_anthropic(http, fake_anthropic, body)
    assert response.status_code == 200
    data = response.json()
    assert data["type"] == "message" and data["role"] == "assistant"
    assert data["id"].startswith("msg_")
    assert data["content"] == [{"type": "text", "text": "Done"}]
    assert data["stop_reason"] == "end_turn"
    assert data["model"] == "claude-sonnet-5-5"
    assert set(data["usage"]) == {"input_tokens", "output_tokens"}
    assert fake_anthropic.invalid == []


@pytest.mark.parametrize("tools_first", [True, False])
async def test_anthropic_counts_a_quarter_of_the_body_with_its_tool_list(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic, tools_first: bool
) -> None:
    # The fake serialises the tool list once and counts the rest around it: the count must
    # stay the whole body's, wherever the list sits in it.
    tools = [anthropic_tool({"type": "object", "properties": {"q": {"type": "string"}}})]
    body = anthropic_body([user(text("Find Acme"))])
    body = {"tools": tools, **body} if tools_first else {**body, "tools": tools}
    fake_anthropic.script(Reply(text="Done"))
    response = await post_anthropic(http, fake_anthropic, body)
    assert response.json()["usage"]["input_tokens"] == len(json.dumps(body)) // 4


@pytest.mark.parametrize(
    ("messages", "extra", "expected"),
    [
        ([user(text(""))], {}, "text content blocks must be non-empty"),
        ([user(text("  \n"))], {}, "text content blocks must contain non-whitespace text"),
        ([user(text("a")), assistant(), user(text("b"))], {}, "must have non-empty content"),
        ([], {}, "at least one message is required"),
        ([assistant(text("a"))], {}, 'first message must use the "user" role'),
        (
            [user(text("a")), assistant(tool_use("toolu_1")), user(text("b"))],
            {},
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1",
        ),
        (
            [user(text("a")), assistant(text("b")), user(tool_result("toolu_9"))],
            {},
            "unexpected `tool_use_id` found in `tool_result` blocks: toolu_9",
        ),
        (
            [user(text("a")), assistant(tool_use("toolu_1"))],
            {},
            "`tool_use` ids were found without `tool_result` blocks",
        ),
        (
            [user(text("a"))],
            {"tools": [{"name": "crm.search", "input_schema": {"type": "object"}}]},
            "String should match pattern '^[a-zA-Z0-9_-]{1,64}$'",
        ),
        (
            [user(text("a"))],
            {"tools": [{"name": "x" * 65, "input_schema": {"type": "object"}}]},
            "String should match pattern",
        ),
        ([user(text("a"))], {"max_tokens": None}, "max_tokens: Field required"),
        *[
            (
                [user(text("a"))],
                {"tools": [anthropic_tool({"type": "object", keyword: [{"required": ["a"]}]})]},
                "tools.0.custom.input_schema: input_schema does not support oneOf, allOf, or "
                "anyOf at the top level",
            )
            for keyword in ("oneOf", "anyOf", "allOf")
        ],
        (
            [user(text("a"))],
            {"tools": [anthropic_tool({"type": "string"})]},
            "tools.0.custom.input_schema.type: Input should be 'object'",
        ),
        (
            [user(text("a"))],
            {"tools": [anthropic_tool({"properties": {}})]},
            "tools.0.custom.input_schema.type: Input should be 'object'",
        ),
        (
            [user(text("a"))],
            {"tools": [anthropic_tool({"type": "object", "properties": []})]},
            "tools.0.custom.input_schema: JSON schema is invalid. It must match JSON Schema "
            "draft 2020-12",
        ),
        (
            [user(text("a"))],
            {"tools": [anthropic_tool({"type": "object"}), anthropic_tool({"type": "object"})]},
            "Tool names must be unique",
        ),
        ([user(text("a"))], {"system": [text("")]}, "text content blocks must be non-empty"),
    ],
)
async def test_anthropic_rejects_what_the_api_rejects(
    http: httpx.AsyncClient,
    fake_anthropic: FakeAnthropic,
    messages: list[dict[str, Any]],
    extra: dict[str, Any],
    expected: str,
) -> None:
    body = anthropic_body(messages, **extra)
    body = {k: v for k, v in body.items() if v is not None}

    response = await post_anthropic(http, fake_anthropic, body)

    assert response.status_code == 400
    assert response.headers["request-id"].startswith("req_")
    error = response.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert expected in error["error"]["message"]
    assert fake_anthropic.invalid == [error["error"]["message"]]


async def test_anthropic_checks_key_and_version_headers(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic
) -> None:
    body = anthropic_body([user(text("a"))])
    url = fake_anthropic.url + "/v1/messages"
    wrong = await http.post(
        url, json=body, headers={"x-api-key": "nope", "anthropic-version": "2023-06-01"}
    )
    assert wrong.status_code == 401
    assert wrong.json()["error"] == {
        "type": "authentication_error",
        "message": "invalid x-api-key",
    }
    no_version = await http.post(url, json=body, headers={"x-api-key": fake_anthropic.api_key})
    assert no_version.status_code == 400
    assert fake_anthropic.invalid == ["anthropic-version header missing"]


async def test_openai_accepts_a_valid_tool_exchange(
    http: httpx.AsyncClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Reply(tool_uses=[ToolUse("crm_search", {"q": 1}, id="call_9")]))
    response = await post_openai(
        http,
        fake_openai,
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "a"},
            openai_calls("call_1", "call_2"),
            {"role": "tool", "tool_call_id": "call_1", "content": "Tool call_1 result: 1"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Tool call_2 result: 2"},
        ],
        tools=[openai_tool("crm_search")],
    )
    assert response.status_code == 200
    data = response.json()
    assert data["object"] == "chat.completion"
    [choice] = data["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {
            "id": "call_9",
            "type": "function",
            "function": {"name": "crm_search", "arguments": '{"q": 1}'},
        }
    ]
    assert fake_openai.invalid == []


def openai_calls(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "crm_search", "arguments": "{}"}}
            for i in ids
        ],
    }


def openai_tool(name: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": parameters or {"type": "object"}},
    }


async def post_openai(
    http: httpx.AsyncClient,
    fake: FakeOpenAI,
    messages: list[dict[str, Any]],
    key: str | None = None,
    **extra: Any,
) -> httpx.Response:
    return await http.post(
        fake.url + "/chat/completions",
        json={"model": "gpt-5.5", "messages": messages, **extra},
        headers={"Authorization": f"Bearer {key or fake.api_key}"},
    )


@pytest.mark.parametrize(
    ("messages", "extra", "expected"),
    [
        ([], {}, "Invalid 'messages': empty array"),
        (
            [{"role": "user", "content": "a"}, openai_calls("call_1", "call_2")],
            {},
            "did not have response messages: call_1, call_2",
        ),
        (
            [
                {"role": "user", "content": "a"},
                openai_calls("call_1", "call_2"),
                {"role": "tool", "tool_call_id": "call_1", "content": "x"},
                {"role": "user", "content": "b"},
            ],
            {},
            "did not have response messages: call_2",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "tool", "tool_call_id": "call_1", "content": "x"},
            ],
            {},
            "messages with role 'tool' must be a response to a preceeding message",
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": None}],
            {},
            "expected a string, got null",
        ),
        (
            [{"role": "user", "content": "a"}],
            {"tools": [openai_tool("crm.search")]},
            "string does not match pattern",
        ),
        (
            [{"role": "user", "content": "a"}],
            {"tools": [openai_tool("x" * 65)]},
            "Expected a string with maximum length 64",
        ),
        (
            [{"role": "user", "content": "a"}],
            {"tools": [openai_tool(f"t{i}") for i in range(129)]},
            "Expected an array with maximum length 128, but got an array with length 129",
        ),
        ([{"role": "user", "content": "a"}], {"tools": []}, "Invalid 'tools': empty array"),
        *[
            (
                [{"role": "user", "content": "a"}],
                {"tools": [openai_tool("crm_search", {"type": "object", keyword: value})]},
                "Invalid schema for function 'crm_search': schema must have type 'object' and "
                "not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level.",
            )
            for keyword, value in [
                ("oneOf", [{"required": ["a"]}]),
                ("anyOf", [{"required": ["a"]}]),
                ("allOf", [{"required": ["a"]}]),
                ("enum", [{}]),
                ("not", {"required": ["a"]}),
            ]
        ],
        (
            [{"role": "user", "content": "a"}],
            {"tools": [openai_tool("crm_search", {"properties": {}})]},
            "Invalid schema for function 'crm_search': schema must be a JSON Schema of "
            "'type: \"object\"', got 'type: \"None\"'.",
        ),
        (
            [{"role": "user", "content": "a"}],
            {"tools": [openai_tool("crm_search", {"type": "array"})]},
            "got 'type: \"array\"'",
        ),
        (
            [{"role": "user", "content": "a"}],
            {"tools": [openai_tool("crm_search", {"type": "object", "properties": []})]},
            "Invalid schema for function 'crm_search': [] is not of type 'object'",
        ),
    ],
)
async def test_openai_rejects_what_the_api_rejects(
    http: httpx.AsyncClient,
    fake_openai: FakeOpenAI,
    messages: list[dict[str, Any]],
    extra: dict[str, Any],
    expected: str,
) -> None:
    response = await post_openai(http, fake_openai, messages, **extra)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert expected in error["message"]
    if "Invalid schema for function" in expected:
        assert error["code"] == "invalid_function_parameters"
        assert error["param"] == "tools[0].function.parameters"
    assert fake_openai.invalid == [error["message"]]


async def test_unknown_models_are_refused_like_the_real_apis(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    body = anthropic_body([user(text("a"))], model="claude-nonexistent")
    anthropic = await post_anthropic(http, fake_anthropic, body)
    assert anthropic.status_code == 404
    assert anthropic.json()["error"] == {
        "type": "not_found_error",
        "message": "model: claude-nonexistent",
    }
    openai = await http.post(
        fake_openai.url + "/chat/completions",
        json={"model": "gpt-nonexistent", "messages": [{"role": "user", "content": "a"}]},
        headers={"Authorization": f"Bearer {fake_openai.api_key}"},
    )
    assert openai.status_code == 404
    assert openai.json()["error"] == {
        "message": "The model `gpt-nonexistent` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
    assert fake_anthropic.invalid == ["model: claude-nonexistent"]
    assert len(fake_openai.invalid) == 1


async def test_openai_401_quotes_a_masked_key_like_the_real_api(
    http: httpx.AsyncClient, fake_openai: FakeOpenAI
) -> None:
    key = "sk-proj-abcdefghijklmnop1234"
    response = await post_openai(http, fake_openai, [{"role": "user", "content": "a"}], key=key)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "invalid_api_key"
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("Incorrect API key provided: sk-*")
    assert "1234." in error["message"]
    assert key not in error["message"]


async def test_script_order_responder_and_default(
    http: httpx.AsyncClient, fake_openai: FakeOpenAI
) -> None:
    messages = [{"role": "user", "content": "a"}]

    async def content() -> Any:
        response = await post_openai(http, fake_openai, messages)
        if response.status_code != 200:
            return response.status_code, response.json()["error"]["message"]
        return response.json()["choices"][0]["message"]["content"]

    assert await content() == "OK"
    fake_openai.script(Reply(text="one"), ErrorReply(503, "busy"), Reply(text="two"))
    fake_openai.responder = lambda body: Reply(text=f"echo {len(body['messages'])}")
    assert [await content() for _ in range(4)] == ["one", (503, "busy"), "two", "echo 1"]
    assert len(fake_openai.requests) == 5
    fake_openai.reset()
    assert fake_openai.requests == [] and fake_openai.responder is None
    assert await content() == "OK"


async def test_a_delay_counts_from_the_requests_arrival(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    """A reply's `delay_s` is the API's latency: the fake's own work on the request is inside
    it, as a real API's is, not added to it (the benchmarks' ideal chat is the delays' sum).
    On a clock moved by hand, the work is stood in for by a responder that moves it 0.5 s: the
    fake then waits the 0.3 s left of the 0.8 s delay, not 0.8 s more."""
    fakes: list[FakeAnthropic | FakeOpenAI] = [fake_anthropic, fake_openai]
    for fake in fakes:
        clock = ManualClock()
        fake.clock, fake.sleep = clock, clock.sleep
        arrived = clock()

        def slow(body: dict[str, Any], clock: ManualClock = clock) -> Reply:
            clock.advance(0.5)
            return Reply(text="late", delay_s=0.8)

        fake.responder = slow
        if isinstance(fake, FakeAnthropic):
            response = await post_anthropic(http, fake, anthropic_body([user(text("a"))]))
        else:
            response = await post_openai(http, fake, [{"role": "user", "content": "a"}])
        assert response.status_code == 200
        assert clock.waits == [pytest.approx(0.3)]
        assert clock() - arrived == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"max_tokens": 10, "messages": [user(text("a"))]}, "model: Field required"),
        (
            anthropic_body(
                [user(text("a")), assistant(tool_use("t1")), assistant(tool_result("t1"))]
            ),
            "`tool_result` blocks are only allowed in user messages",
        ),
        (
            anthropic_body(
                [
                    user(text("a")),
                    assistant(tool_use("t1")),
                    user(tool_result("t1"), tool_result("t1")),
                ]
            ),
            "each `tool_use_id` must be answered once",
        ),
        (
            anthropic_body(
                [user(text("a"))],
                tools=[{"name": "x", "description": 5, "input_schema": {"type": "object"}}],
            ),
            "tools.0.custom.description: Input should be a valid string",
        ),
        (
            anthropic_body([user(text("a")), assistant(text("b")), user(tool_use("t1"))]),
            "only allowed in assistant",
        ),
    ],
)
async def test_anthropic_rejects_more_of_what_the_api_rejects(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic, body: dict[str, Any], expected: str
) -> None:
    response = await post_anthropic(http, fake_anthropic, body)
    assert response.status_code == 400
    assert expected in response.json()["error"]["message"]
    assert fake_anthropic.invalid == [response.json()["error"]["message"]]


async def test_anthropic_refuses_no_key_and_a_body_that_is_not_json(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic
) -> None:
    url = fake_anthropic.url + "/v1/messages"
    no_key = await http.post(url, json=anthropic_body([user(text("a"))]))
    assert no_key.status_code == 401
    assert no_key.json()["error"] == {
        "type": "authentication_error",
        "message": "x-api-key header is required",
    }
    headers = {"x-api-key": fake_anthropic.api_key, "anthropic-version": "2023-06-01"}
    broken = await http.post(url, content=b"{nope", headers=headers)
    assert broken.status_code == 400
    assert broken.json()["error"]["type"] == "invalid_request_error"


async def test_both_refuse_a_json_body_not_declared_as_json(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    """The service posts pre-encoded bytes (docs/providers.md, "Request bodies"): a body that
    lost its `Content-Type: application/json` on the way must fail the test that sent it."""
    raw = b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"}]}'
    anthropic_headers = {
        "x-api-key": fake_anthropic.api_key,
        "anthropic-version": "2023-06-01",
        "content-type": "text/plain",
    }
    refused = await http.post(
        fake_anthropic.url + "/v1/messages", content=raw, headers=anthropic_headers
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["type"] == "invalid_request_error"
    assert fake_anthropic.invalid == ["body is not JSON"]

    openai_headers = {"authorization": f"Bearer {fake_openai.api_key}"}  # no content-type
    refused = await http.post(
        fake_openai.url + "/chat/completions", content=raw, headers=openai_headers
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("We could not parse the JSON body")
    assert fake_openai.invalid == ["body is not JSON"]
    assert [r.body for r in fake_anthropic.received + fake_openai.received] == [raw, raw]


@pytest.mark.parametrize(
    ("body", "expected", "param"),
    [
        (
            {"messages": [{"role": "user", "content": "a"}]},
            "you must provide a model parameter",
            "model",
        ),
        (
            {
                "model": "gpt-5.5",
                "messages": [{"role": "user", "content": "a"}],
                "max_completion_tokens": 0,
            },
            "integer below minimum value",
            "max_completion_tokens",
        ),
        (
            {
                "model": "gpt-5.5",
                "messages": [{"role": "user", "content": "a"}],
                "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}],
            },
            "Invalid schema for function 'f': [] is not of type 'object', 'boolean'.",
            "tools[0].function.parameters",
        ),
    ],
)
async def test_openai_rejects_more_of_what_the_api_rejects(
    http: httpx.AsyncClient,
    fake_openai: FakeOpenAI,
    body: dict[str, Any],
    expected: str,
    param: str,
) -> None:
    response = await http.post(
        fake_openai.url + "/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {fake_openai.api_key}"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert expected in error["message"] and error["param"] == param
    assert fake_openai.invalid == [error["message"]]


async def test_openai_refuses_no_key_and_a_body_that_is_not_json(
    http: httpx.AsyncClient, fake_openai: FakeOpenAI
) -> None:
    url = fake_openai.url + "/chat/completions"
    no_key = await http.post(url, json={"model": "gpt-5.5", "messages": []})
    assert no_key.status_code == 401
    assert no_key.json()["error"]["message"].startswith("You didn't provide an API key.")
    broken = await http.post(
        url, content=b"{nope", headers={"Authorization": f"Bearer {fake_openai.api_key}"}
    )
    assert broken.status_code == 400
    assert broken.json()["error"]["message"].startswith("We could not parse the JSON body")


async def test_both_list_models_only_for_the_right_key(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    url = fake_anthropic.url + "/v1/models"
    version = {"anthropic-version": "2023-06-01"}
    missing = await http.get(url, headers=version)
    assert missing.status_code == 401
    assert missing.json()["error"] == {
        "type": "authentication_error",
        "message": "x-api-key header is required",
    }
    wrong = await http.get(url, headers={"x-api-key": "nope", **version})
    assert (wrong.status_code, wrong.json()["error"]["message"]) == (401, "invalid x-api-key")
    no_version = await http.get(url, headers={"x-api-key": fake_anthropic.api_key})
    assert no_version.status_code == 400
    too_many = await http.get(
        url, params={"limit": "1001"}, headers={"x-api-key": fake_anthropic.api_key, **version}
    )
    assert too_many.status_code == 400
    assert fake_anthropic.invalid == ["anthropic-version header missing", "limit '1001'"]
    listed = await http.get(url, headers={"x-api-key": fake_anthropic.api_key, **version})
    assert listed.status_code == 200
    assert [m["id"] for m in listed.json()["data"]] == sorted(fake_anthropic.models)
    assert listed.json()["has_more"] is False

    url = fake_openai.url + "/models"
    none = await http.get(url)
    assert none.status_code == 401
    assert none.json()["error"]["message"].startswith("You didn't provide an API key.")
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz"
    wrong = await http.get(url, headers={"Authorization": f"Bearer {key}"})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert key not in wrong.text
    listed = await http.get(url, headers={"Authorization": f"Bearer {fake_openai.api_key}"})
    assert listed.json()["object"] == "list"
    assert [m["id"] for m in listed.json()["data"]] == sorted(fake_openai.models)


async def test_anthropic_pages_the_models_list_after_and_before_a_model(
    http: httpx.AsyncClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.models = {"model-a", "model-b", "model-c", "model-d", "model-e"}
    url = fake_anthropic.url + "/v1/models"
    headers = {"x-api-key": fake_anthropic.api_key, "anthropic-version": "2023-06-01"}

    async def page(**params: str) -> tuple[list[str], bool]:
        answer = await http.get(url, params=params, headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        ids = [model["id"] for model in body["data"]]
        assert (body["first_id"], body["last_id"]) == (ids[0], ids[-1])
        return ids, body["has_more"]

    assert await page(limit="2") == (["model-a", "model-b"], True)
    assert await page(limit="2", after_id="model-b") == (["model-c", "model-d"], True)
    assert await page(limit="2", after_id="model-c") == (["model-d", "model-e"], False)
    assert await page(limit="2", before_id="model-e") == (["model-c", "model-d"], True)
    assert await page(limit="2", before_id="model-c") == (["model-a", "model-b"], False)
    unknown = await http.get(url, params={"after_id": "model-z"}, headers=headers)
    assert unknown.status_code == 400
    assert unknown.json()["error"]["type"] == "invalid_request_error"
    assert fake_anthropic.invalid == ["after_id 'model-z'"]
