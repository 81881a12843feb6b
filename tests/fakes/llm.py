"""Loopback fakes of the Anthropic Messages API and the OpenAI Chat Completions API.

Each fake is a real HTTP server on 127.0.0.1 (LoopbackServer) that the real SDK talks to through
its base URL. It checks the credentials and validates every request the way the real API does
(the checks below are the ones the real APIs are known to make, with their real error shapes):
a request that fails gets the API's 400 answer AND is recorded in `fake.invalid`, so a test can
assert that the code under test only ever sends requests the real API accepts.

Tests script the answers:

    fake.script(Reply(text="Hi"), Reply(tool_uses=[ToolUse("crm_search", {"q": "x"})]))
    fake.script(ErrorReply(429, "Rate limited"))

Scripted answers are consumed one per request, in order; with an empty queue the `responder`
answers (benchmarks), else `Reply(text="OK")`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import marshal
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import Draft202012Validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.server import LoopbackServer

__all__ = [
    "ErrorReply",
    "FakeAnthropic",
    "FakeOpenAI",
    "RawReply",
    "Received",
    "Reply",
    "ToolUse",
]

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
OPENAI_MAX_TOOLS = 128
CONTEXT_WINDOW = 200_000
# The models each fake serves (the service's configured defaults); any other id is refused
# with the API's own "model not found" answer. Tests may change `fake.models`; `reset` undoes it.
ANTHROPIC_MODELS = frozenset({"claude-sonnet-5-5"})
OPENAI_MODELS = frozenset({"gpt-5.5"})
ANTHROPIC_TOP_LEVEL_REFUSED = ("oneOf", "allOf", "anyOf")
OPENAI_TOP_LEVEL_REFUSED = ("oneOf", "anyOf", "allOf", "enum", "not")


@dataclass
class ToolUse:
    name: str
    arguments: dict[str, Any]
    id: str | None = None  # generated (toolu_... / call_...) when None
    raw_arguments: str | None = None  # OpenAI only: sent as is (a model's malformed JSON)


@dataclass
class Reply:
    text: str = ""
    tool_uses: list[ToolUse] = field(default_factory=list)
    delay_s: float = 0.0  # the answer leaves this long after the request arrived
    usage: tuple[int, int] | None = None  # (input, output) tokens; estimated when None
    chunk_delay_s: float = 0.0  # streaming: the pause before each text chunk

    def chunks(self) -> list[str]:
        """The text as a streaming API sends it: a few characters a chunk (a word here)."""
        return re.findall(r"\S+\s*|\s+", self.text)


@dataclass
class ErrorReply:
    status: int
    message: str
    error_type: str | None = None  # the API's usual type for `status` when None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RawReply:
    """An answer that is not the API's own, as a proxy or gateway in front of it can give
    (an HTML page, a cut-off body): sent as it is, with its status and content type."""

    body: str
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    delay_s: float = 0.0

    def response(self) -> Response:
        return Response(self.body, status_code=self.status, media_type=self.content_type)


Answer = Reply | ErrorReply | RawReply


@dataclass(frozen=True)
class Received:
    """One request as the fake read it: headers (lower-case names), the body's bytes, and the
    client's port (the same port, the same kept-alive connection)."""

    headers: dict[str, str]
    body: bytes
    port: int = 0


Responder = Callable[[dict[str, Any]], Answer]


class Invalid(Exception):
    """A request the real API would refuse (400 unless said otherwise); `param` names the
    offending field, `code` is OpenAI's error code."""

    def __init__(
        self, message: str, param: str | None = None, *, status: int = 400, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.code = code


class _FakeLLM:
    """What both fakes share: the script, the record of requests, the server's lifecycle."""

    id_prefix = ""
    default_models: frozenset[str] = frozenset()

    def __init__(self, api_key: str, models: frozenset[str] | None = None) -> None:
        self.api_key = api_key
        self._started_models = frozenset(self.default_models if models is None else models)
        self.models = set(self._started_models)
        self.responder: Responder | None = None
        # The model's context window, in this fake's estimate of a request's tokens (`_tokens`):
        # a longer request gets the API's own "too long" answer.
        self.context_window = CONTEXT_WINDOW
        self.requests: list[dict[str, Any]] = []
        # Each request as it came over the wire (after the key was accepted): its headers and
        # its body's bytes, to compare what two ways of calling the SDK send.
        self.received: list[Received] = []
        self.invalid: list[str] = []
        self._queue: deque[Answer] = deque()
        self._lock = threading.Lock()  # the test thread scripts, the server thread consumes
        self._server = LoopbackServer(self._app())
        self._use_real_time()

    def _use_real_time(self) -> None:
        # When a request arrived, and the wait until its answer is due (`Reply.delay_s`): a test
        # replaces them to hold or time the answers without waiting on the wall clock.
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> _FakeLLM:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    @property
    def url(self) -> str:
        raise NotImplementedError

    def _app(self) -> Starlette:
        raise NotImplementedError

    # -- scripting -------------------------------------------------------------------------

    def script(self, *replies: Answer) -> None:
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.responder = None
            self.requests.clear()
            self.received.clear()
            self.invalid.clear()
            self.models = set(self._started_models)  # what a test added or replaced is undone
            self.context_window = CONTEXT_WINDOW
            self._use_real_time()

    def _next_answer(self, body: dict[str, Any]) -> Answer:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            responder = self.responder
        return responder(body) if responder is not None else Reply(text="OK")

    def _new_id(self) -> str:
        return self.id_prefix + uuid.uuid4().hex[:24]

    async def _answer_time(self, arrived: float, delay_s: float) -> None:
        """Wait until `delay_s` after the request arrived: a real API's latency holds its own
        parsing and checks, so the fake's (~2.5 ms for a 25 KB request) are inside the delay,
        not added to it (a benchmark's ideal chat counts the provider's time as its delays)."""
        if delay_s:
            await self.sleep(max(0.0, arrived + delay_s - self.clock()))

    @property
    def retry_counts(self) -> list[str | None]:
        """Each request's `x-stainless-retry-count` header, as the SDKs number their attempts
        (0 for the first, 1 for the first retry...): a test can tell the SDK's own retries from
        a new call by the service."""
        return [received.headers.get("x-stainless-retry-count") for received in self.received]

    def _reject(self, message: str) -> None:
        self.invalid.append(message)

    async def _json_body(self, request: Request) -> Any:
        """The body as JSON; ValueError when it is not JSON, or not declared as JSON (both
        APIs take `application/json` bodies only)."""
        raw = await request.body()
        port = request.client.port if request.client is not None else 0
        self.received.append(Received(dict(request.headers), raw, port))
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise ValueError(f"content-type {content_type!r}")
        return json.loads(raw)


# -- Anthropic ----------------------------------------------------------------------------------

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class FakeAnthropic(_FakeLLM):
    """`POST /v1/messages`, as the real API answers it without streaming."""

    id_prefix = "toolu_"
    default_models = ANTHROPIC_MODELS

    @property
    def url(self) -> str:
        """The SDK appends `/v1/messages` itself."""
        return self._server.url

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/models", self._list_models, methods=["GET"]),
            ]
        )

    def _refused_key(self, request: Request) -> JSONResponse | None:
        """The API's 401 for a missing or wrong key, or None for the right one."""
        # The API takes the key as `x-api-key`, or as a bearer token (what SDK 2.x sends).
        auth = request.headers.get("authorization", "")
        key = request.headers.get("x-api-key") or (auth[7:] if auth.startswith("Bearer ") else "")
        if not key:
            return self._error(401, "x-api-key header is required")
        if key != self.api_key:
            return self._error(401, "invalid x-api-key")
        return None

    async def _list_models(self, request: Request) -> Response:
        """`GET /v1/models`: in a fixed order (by id here), pages of `limit` (1-1000, default
        20); `after_id` gives the page right after that model, `before_id` the page right
        before it, and `has_more` says whether more lie that way."""
        refused = self._refused_key(request)
        if refused is not None:
            return refused
        if not request.headers.get("anthropic-version"):
            self._reject("anthropic-version header missing")
            return self._error(400, "anthropic-version: header is required")
        query = request.query_params
        raw_limit = query.get("limit", "20")
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 1000:
            self._reject(f"limit {raw_limit!r}")
            return self._error(400, "limit: Input should be between 1 and 1000")
        limit, ids = int(raw_limit), sorted(self.models)
        start, end = 0, len(ids)
        for name in ("after_id", "before_id"):
            cursor = query.get(name)
            if cursor is None:
                continue
            if cursor not in ids:
                self._reject(f"{name} {cursor!r}")
                return self._error(400, f"{name}: no model has the id {cursor!r}")
            if name == "after_id":
                start = ids.index(cursor) + 1
            else:
                end = ids.index(cursor)
        backwards = "before_id" in query and "after_id" not in query
        page = ids[max(start, end - limit) : end] if backwards else ids[start : start + limit]
        models = [
            {
                "type": "model",
                "id": model,
                "display_name": model,
                "created_at": "2026-01-01T00:00:00Z",
            }
            for model in page
        ]
        return JSONResponse(
            {
                "data": models,
                "has_more": end - start > len(models),
                "first_id": models[0]["id"] if models else None,
                "last_id": models[-1]["id"] if models else None,
            }
        )

    def _error(
        self, status: int, message: str, error_type: str | None = None, **headers: str
    ) -> JSONResponse:
        request_id = "req_" + uuid.uuid4().hex[:24]
        body = {
            "type": "error",
            "error": {
                "type": error_type or _ANTHROPIC_ERROR_TYPES.get(status, "api_error"),
                "message": message,
            },
            "request_id": request_id,
        }
        return JSONResponse(body, status_code=status, headers={"request-id": request_id, **headers})

    async def _messages(self, request: Request) -> Response:
        arrived = self.clock()
        refused = self._refused_key(request)
        if refused is not None:
            return refused
        try:
            body = await self._json_body(request)
        except ValueError:
            self._reject("body is not JSON")
            return self._error(400, "There was an issue with your request: invalid JSON body")
        self.requests.append(body)
        if not request.headers.get("anthropic-version"):
            self._reject("anthropic-version header missing")
            return self._error(400, "anthropic-version: header is required")
        tools = _tool_list(body.get("tools") if isinstance(body, dict) else None)
        try:
            _validate_anthropic(body, self.models, tools)
            tokens = _tokens(body, tools)
            if tokens > self.context_window:
                raise Invalid(
                    f"prompt is too long: {tokens} tokens > {self.context_window} maximum"
                )
        except Invalid as exc:
            self._reject(exc.message)
            return self._error(exc.status, exc.message)

        answer = self._next_answer(body)
        await self._answer_time(arrived, answer.delay_s)
        if isinstance(answer, RawReply):
            return answer.response()
        if isinstance(answer, ErrorReply):
            return self._error(answer.status, answer.message, answer.error_type, **answer.headers)
        content: list[dict[str, Any]] = []
        if answer.text:
            content.append({"type": "text", "text": answer.text})
        for use in answer.tool_uses:
            content.append(
                {
                    "type": "tool_use",
                    "id": self._new_id() if use.id is None else use.id,
                    "name": use.name,
                    "input": use.arguments,
                }
            )
        message_id = "msg_" + uuid.uuid4().hex[:24]
        used = answer.usage or (tokens, len(answer.text) // 4)
        if body.get("stream") is True:
            return StreamingResponse(
                _anthropic_events(body, answer, content, message_id, used),
                media_type="text/event-stream",
                headers={"request-id": "req_" + uuid.uuid4().hex[:24]},
            )
        return JSONResponse(
            {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "tool_use" if answer.tool_uses else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": used[0], "output_tokens": used[1]},
            },
            headers={"request-id": "req_" + uuid.uuid4().hex[:24]},
        )


def _sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {text}\n\n".encode()


async def _anthropic_events(
    body: dict[str, Any],
    answer: Reply,
    content: list[dict[str, Any]],
    message_id: str,
    used: tuple[int, int],
) -> AsyncIterator[bytes]:
    """The Messages API's streaming wire format: message_start, one content_block_start /
    _delta(s) / _stop per block (text_delta, input_json_delta), message_delta with the stop
    reason and the output tokens, message_stop; a ping after the first block's start."""
    yield _sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": used[0], "output_tokens": 1},
            },
        },
    )
    for index, block in enumerate(content):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
        else:
            start = {**block, "input": {}}
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        if index == 0:
            yield _sse("ping", {"type": "ping"})
        if block["type"] == "text":
            for chunk in answer.chunks():
                if answer.chunk_delay_s:
                    await asyncio.sleep(answer.chunk_delay_s)
                delta = {"type": "text_delta", "text": chunk}
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
        else:
            raw = json.dumps(block["input"])
            for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                delta = {"type": "input_json_delta", "partial_json": part}
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if answer.tool_uses else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": used[1]},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def _tokens(body: dict[str, Any], tools: ToolList | None = None) -> int:
    """A quarter of the body's length as `json.dumps` writes it; with `tools`, the tool list's
    length as it writes it, so that the largest part is not serialised again."""
    if tools is None or "tools" not in body:
        return max(1, len(json.dumps(body)) // 4)
    rest = {key: value for key, value in body.items() if key != "tools"}
    # `"tools": ` and, unless it is the only member, the `, ` between it and the others.
    length = len(json.dumps(rest)) + len('"tools": ') + tools.length + (2 if rest else 0)
    return max(1, length // 4)


def _nonblank_text(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _blank_text(where: str, text: Any) -> str:
    """The API's two messages: one for an empty text block, one for a whitespace-only one."""
    if text:
        return f"{where}: text content blocks must contain non-whitespace text"
    return f"{where}: text content blocks must be non-empty"


def _validate_anthropic(body: Any, models: set[str], tools: ToolList) -> None:
    """`tools`: the body's tool list (`_tool_list`)."""
    if not isinstance(body, dict):
        raise Invalid("body: Input should be an object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Invalid("model: Field required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise Invalid("max_tokens: Field required")
    if max_tokens < 1:
        raise Invalid("max_tokens: Input should be greater than or equal to 1")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise Invalid("stream: Input should be a valid boolean")
    system = body.get("system")
    if system is not None:
        if isinstance(system, list):
            for i, block in enumerate(system):
                if not isinstance(block, dict) or block.get("type") != "text":
                    raise Invalid(f"system.{i}: Input should be a text block")
                if not _nonblank_text(block.get("text")):
                    raise Invalid(_blank_text("system", block.get("text")))
        elif not isinstance(system, str):
            raise Invalid("system: Input should be a valid string")
    if tools.problem is not None:
        raise Invalid(tools.problem)
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise Invalid("messages: Field required")
    if not messages:
        raise Invalid("messages: at least one message is required")
    if not isinstance(messages[0], dict) or messages[0].get("role") != "user":
        raise Invalid('messages: first message must use the "user" role')
    previous_tool_uses: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise Invalid(f"messages.{i}: Input should be an object")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        blocks = _anthropic_blocks(message.get("content"), i, last=i == len(messages) - 1)
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        if previous_tool_uses:
            missing = [u for u in previous_tool_uses if u not in results]
            if missing:
                raise Invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
        unexpected = [r for r in results if r not in previous_tool_uses]
        if unexpected:
            raise Invalid(
                f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(unexpected)}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )
        if len(set(results)) != len(results):
            raise Invalid(f"messages.{i}.content: each `tool_use_id` must be answered once")
        if results and role != "user":
            raise Invalid(f"messages.{i}: `tool_result` blocks are only allowed in user messages")
        uses = [b for b in blocks if b["type"] == "tool_use"]
        if uses and role != "assistant":
            raise Invalid(f"messages.{i}: `tool_use` blocks are only allowed in assistant messages")
        previous_tool_uses = [b["id"] for b in uses]
    if previous_tool_uses:
        raise Invalid(
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {', '.join(previous_tool_uses)}."
        )
    if body["model"] not in models:
        raise Invalid(f"model: {body['model']}", status=404)


@dataclass(frozen=True)
class ToolList:
    problem: str | None  # what the API answers about it, if it refuses it
    length: int  # of its JSON as `json.dumps` writes it (`_tokens`)


_TOOL_LISTS: dict[bytes, ToolList] = {}


def _tool_list(tools: Any) -> ToolList:
    """The verdict on a request's tool list and its length, kept by its `marshal` bytes: a
    chat sends the same list (~25 KB with 37 tools) with each call, so both are taken once
    per list, not on every request. Equal bytes are equal lists; `marshal` writes them in a
    tenth of `json.dumps`'s time, which with the JSON's parse was 80% of the fake's CPU per
    request under the benchmarks' load (its CPU shares the cores with the service's)."""
    key = marshal.dumps(tools)
    known = _TOOL_LISTS.get(key)
    if known is None:
        if len(_TOOL_LISTS) >= 256:
            _TOOL_LISTS.clear()
        try:
            _validate_anthropic_tools(tools)
            known = ToolList(None, len(json.dumps(tools)))
        except Invalid as exc:
            known = ToolList(exc.message, 0)
        _TOOL_LISTS[key] = known
    return known


def _validate_anthropic_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise Invalid("tools: Input should be a valid list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise Invalid(f"tools.{i}: Input should be an object")
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise Invalid(
                f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            )
        if name in names:
            raise Invalid("tools: Tool names must be unique.")
        names.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise Invalid(f"tools.{i}.custom.input_schema: Field required")
        if schema.get("type") != "object":
            raise Invalid(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
        if any(k in schema for k in ANTHROPIC_TOP_LEVEL_REFUSED):
            raise Invalid(
                f"tools.{i}.custom.input_schema: input_schema does not support oneOf, allOf, "
                "or anyOf at the top level"
            )
        if _schema_problem(schema) is not None:
            raise Invalid(
                f"tools.{i}.custom.input_schema: JSON schema is invalid. It must match JSON "
                "Schema draft 2020-12 (https://json-schema.org/draft/2020-12). Learn more "
                "about tool use at https://docs.anthropic.com/en/docs/tool-use."
            )
        if "description" in tool and not isinstance(tool["description"], str):
            raise Invalid(f"tools.{i}.custom.description: Input should be a valid string")


def _schema_problem(schema: dict[str, Any]) -> str | None:
    # The same schema gets the same verdict: checked once, not on every request (a check
    # against the metaschema costs about 1 ms, and a chat sends the same tool list each call;
    # uncached, the fake spent 30 ms per request and set the pace of every chat benchmark).
    return _checked_schema(json.dumps(schema, sort_keys=True))


@functools.lru_cache(maxsize=4096)
def _checked_schema(canonical: str) -> str | None:
    try:
        Draft202012Validator.check_schema(json.loads(canonical))
    except SchemaError as exc:
        return exc.message
    return None


def _anthropic_blocks(content: Any, index: int, *, last: bool) -> list[dict[str, Any]]:
    """The message's content as blocks, checked like the API checks them."""
    where = f"messages.{index}"
    if isinstance(content, str):
        if content == "" and last:
            return []
        if content == "":
            raise Invalid(
                f"{where}: all messages must have non-empty content except for the optional "
                "final assistant message"
            )
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise Invalid(f"{where}.content: Input should be a valid list")
    if not content and not last:
        raise Invalid(
            f"{where}: all messages must have non-empty content except for the optional "
            "final assistant message"
        )
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            raise Invalid(f"{where}.content.{j}: Input should be an object")
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise Invalid(f"{where}.content.{j}.text.text: Field required")
            if not _nonblank_text(block["text"]):
                raise Invalid(_blank_text("messages", block["text"]))
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not block["id"]:
                raise Invalid(f"{where}.content.{j}.tool_use.id: Field required")
            if not isinstance(block.get("name"), str) or not TOOL_NAME.match(block["name"]):
                raise Invalid(
                    f"{where}.content.{j}.tool_use.name: String should match pattern "
                    "'^[a-zA-Z0-9_-]{1,64}$'"
                )
            if not isinstance(block.get("input"), dict):
                raise Invalid(f"{where}.content.{j}.tool_use.input: Input should be an object")
        elif kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise Invalid(f"{where}.content.{j}.tool_result.tool_use_id: Field required")
            result = block.get("content")
            if isinstance(result, list):
                for part in result:
                    if not isinstance(part, dict) or part.get("type") != "text":
                        raise Invalid(f"{where}.content.{j}.tool_result.content: invalid block")
                    if not _nonblank_text(part.get("text")):
                        raise Invalid(_blank_text("messages", part.get("text")))
            elif result is not None and not isinstance(result, str):
                raise Invalid(f"{where}.content.{j}.tool_result.content: Input should be a string")
        else:
            raise Invalid(f"{where}.content.{j}: Input tag '{kind}' found using 'type' is invalid")
    return content


# -- OpenAI -------------------------------------------------------------------------------------

_OPENAI_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", None),
    404: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


def mask_openai_key(key: str) -> str:
    """How the real API quotes a wrong key in its 401 message: its start and its end."""
    if len(key) <= 8:
        return "*" * len(key)
    return key[:3] + "*" * (len(key) - 7) + key[-4:]


class FakeOpenAI(_FakeLLM):
    """`POST /v1/chat/completions`, as the real API answers it without streaming."""

    id_prefix = "call_"
    default_models = OPENAI_MODELS

    @property
    def url(self) -> str:
        """The SDK appends `/chat/completions` to a base that ends in `/v1`."""
        return self._server.url + "/v1"

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._completions, methods=["POST"]),
                Route("/v1/models", self._list_models, methods=["GET"]),
            ]
        )

    def _refused_key(self, request: Request) -> JSONResponse | None:
        """The API's 401 for a missing or wrong bearer key, or None for the right one."""
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            return self._error(
                401,
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                code="",
            )
        key = auth[7:].strip()
        if key != self.api_key:
            return self._error(
                401,
                f"Incorrect API key provided: {mask_openai_key(key)}. You can find your API key "
                "at https://platform.openai.com/account/api-keys.",
            )
        return None

    async def _list_models(self, request: Request) -> Response:
        """`GET /v1/models`: every model the key may use, in one list."""
        refused = self._refused_key(request)
        if refused is not None:
            return refused
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": model, "object": "model", "created": 1767225600, "owned_by": "system"}
                    for model in sorted(self.models)
                ],
            }
        )

    def _error(
        self,
        status: int,
        message: str,
        error_type: str | None = None,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> JSONResponse:
        default_type, default_code = _OPENAI_ERRORS.get(status, ("server_error", None))
        body = {
            "error": {
                "message": message,
                "type": error_type or default_type,
                "param": param,
                "code": code if code is not None else default_code,
            }
        }
        return JSONResponse(
            body,
            status_code=status,
            headers={"x-request-id": "req_" + uuid.uuid4().hex, **(headers or {})},
        )

    async def _completions(self, request: Request) -> Response:
        arrived = self.clock()
        refused = self._refused_key(request)
        if refused is not None:
            return refused
        try:
            body = await self._json_body(request)
        except ValueError:
            self._reject("body is not JSON")
            return self._error(
                400,
                "We could not parse the JSON body of your request. (HINT: This likely means "
                "you aren't using your HTTP library correctly.)",
            )
        self.requests.append(body)
        try:
            _validate_openai(body, self.models)
            tokens = _tokens(body)
            if tokens > self.context_window:
                raise Invalid(
                    f"This model's maximum context length is {self.context_window} tokens. "
                    f"However, your messages resulted in {tokens} tokens. Please reduce "
                    "the length of the messages.",
                    "messages",
                    code="context_length_exceeded",
                )
        except Invalid as exc:
            self._reject(exc.message)
            return self._error(exc.status, exc.message, param=exc.param, code=exc.code)

        answer = self._next_answer(body)
        await self._answer_time(arrived, answer.delay_s)
        if isinstance(answer, RawReply):
            return answer.response()
        if isinstance(answer, ErrorReply):
            return self._error(
                answer.status, answer.message, answer.error_type, headers=answer.headers
            )
        message: dict[str, Any] = {
            "role": "assistant",
            "content": answer.text if answer.text or not answer.tool_uses else None,
            "refusal": None,
            "annotations": [],
        }
        if answer.tool_uses:
            message["tool_calls"] = [
                {
                    "id": self._new_id() if use.id is None else use.id,
                    "type": "function",
                    "function": {
                        "name": use.name,
                        "arguments": use.raw_arguments
                        if use.raw_arguments is not None
                        else json.dumps(use.arguments),
                    },
                }
                for use in answer.tool_uses
            ]
        prompt_tokens, completion_tokens = answer.usage or (tokens, len(answer.text) // 4)
        if body.get("stream") is True:
            return StreamingResponse(
                _openai_chunks(body, answer, message, (prompt_tokens, completion_tokens)),
                media_type="text/event-stream",
                headers={"x-request-id": "req_" + uuid.uuid4().hex},
            )
        return JSONResponse(
            {
                "id": "chatcmpl-" + uuid.uuid4().hex[:29],
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": "tool_calls" if answer.tool_uses else "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
                "system_fingerprint": "fp_fake",
            },
            headers={"x-request-id": "req_" + uuid.uuid4().hex},
        )


async def _openai_chunks(
    body: dict[str, Any], answer: Reply, message: dict[str, Any], used: tuple[int, int]
) -> AsyncIterator[bytes]:
    """Chat Completions' streaming wire format: `chat.completion.chunk` objects, the first
    with the role, content pieces, tool calls by index (id, type and name first, then the
    arguments in pieces), a last chunk with the finish reason; with
    `stream_options.include_usage`, a chunk with empty `choices` and the usage (and `usage:
    null` on the others); then `data: [DONE]`."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": "chatcmpl-" + uuid.uuid4().hex[:29],
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body["model"],
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data: dict[str, Any] = {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            data["usage"] = None
        return _sse(None, data)

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in answer.chunks():
        if answer.chunk_delay_s:
            await asyncio.sleep(answer.chunk_delay_s)
        yield chunk({"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": function["name"], "arguments": ""},
                    }
                ]
            }
        )
        raw = function["arguments"]
        for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    yield chunk({}, "tool_calls" if answer.tool_uses else "stop")
    if include_usage:
        usage = {
            "prompt_tokens": used[0],
            "completion_tokens": used[1],
            "total_tokens": used[0] + used[1],
        }
        yield _sse(None, {**base, "choices": [], "usage": usage})
    yield _sse(None, "[DONE]")


def _validate_openai(body: Any, models: set[str]) -> None:
    if not isinstance(body, dict):
        raise Invalid("Invalid type for body: expected an object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Invalid("you must provide a model parameter", "model")
    for limit in ("max_tokens", "max_completion_tokens"):
        value = body.get(limit)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise Invalid(
                f"Invalid '{limit}': integer below minimum value. Expected a value >= 1.", limit
            )
    _validate_openai_stream(body)
    _validate_openai_tools(body)
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise Invalid("Missing required parameter: 'messages'.", "messages")
    if not messages:
        raise Invalid(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            "messages",
        )
    pending: list[str] = []  # tool_call_ids of the last assistant message not yet answered
    answerable: set[str] = set()
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise Invalid(f"Invalid type for '{where}': expected an object.", where)
        role = message.get("role")
        if role != "tool" and pending:
            raise Invalid(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}",
                "messages",
            )
        content = message.get("content")
        if role in ("system", "developer", "user"):
            _openai_content(content, where, required=True)
            answerable = set()
        elif role == "assistant":
            calls = message.get("tool_calls")
            if calls is None:
                _openai_content(content, where, required=True)
                answerable = set()
                continue
            if content is not None:
                _openai_content(content, where, required=False)
            if not isinstance(calls, list) or not calls:
                raise Invalid(
                    f"Invalid '{where}.tool_calls': empty array. Expected an array with "
                    "minimum length 1, but got an empty array instead.",
                    f"{where}.tool_calls",
                )
            pending = []
            for j, call in enumerate(calls):
                at = f"{where}.tool_calls[{j}]"
                if not isinstance(call, dict) or not isinstance(call.get("id"), str):
                    raise Invalid(f"Missing required parameter: '{at}.id'.", f"{at}.id")
                if call.get("type") != "function":
                    raise Invalid(f"Missing required parameter: '{at}.type'.", f"{at}.type")
                function = call.get("function")
                if not isinstance(function, dict):
                    raise Invalid(f"Missing required parameter: '{at}.function'.", at)
                if not isinstance(function.get("name"), str):
                    raise Invalid(f"Missing required parameter: '{at}.function.name'.", at)
                if not isinstance(function.get("arguments"), str):
                    raise Invalid(
                        f"Invalid type for '{at}.function.arguments': expected a string.", at
                    )
                pending.append(call["id"])
            answerable = set(pending)
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise Invalid(
                    f"Missing required parameter: '{where}.tool_call_id'.", f"{where}.tool_call_id"
                )
            if call_id not in answerable:
                raise Invalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"{where}.role",
                )
            _openai_content(content, where, required=True)
            answerable.discard(call_id)
            pending = [p for p in pending if p != call_id]
        else:
            raise Invalid(
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                "'user', 'tool', 'function', and 'developer'.",
                f"{where}.role",
            )
    if pending:
        raise Invalid(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(pending)}",
            "messages",
        )
    if body["model"] not in models:
        raise Invalid(
            f"The model `{body['model']}` does not exist or you do not have access to it.",
            status=404,
            code="model_not_found",
        )


def _validate_openai_stream(body: dict[str, Any]) -> None:
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise Invalid(
            f"Invalid type for 'stream': expected a boolean, but got {type(stream).__name__} "
            "instead.",
            "stream",
            code="invalid_type",
        )
    options = body.get("stream_options")
    if options is None:
        return
    if stream is not True:
        raise Invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
        )
    if not isinstance(options, dict):
        raise Invalid(
            "Invalid type for 'stream_options': expected an object, but got "
            f"{type(options).__name__} instead.",
            "stream_options",
            code="invalid_type",
        )
    for name, value in options.items():
        if name not in ("include_usage", "include_obfuscation"):
            raise Invalid(
                f"Unrecognized request argument supplied: stream_options.{name}",
                f"stream_options.{name}",
            )
        if not isinstance(value, bool):
            raise Invalid(
                f"Invalid type for 'stream_options.{name}': expected a boolean, but got "
                f"{type(value).__name__} instead.",
                f"stream_options.{name}",
                code="invalid_type",
            )


def _openai_content(content: Any, where: str, *, required: bool) -> None:
    if content is None:
        if required:
            raise Invalid(
                f"Invalid value for '{where}.content': expected a string, got null.",
                f"{where}.content",
            )
        return
    if isinstance(content, str):
        return
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise Invalid(f"Invalid '{where}.content[{j}]': unsupported part.", where)
            if not isinstance(part.get("text"), str):
                raise Invalid(f"Missing required parameter: '{where}.content[{j}].text'.", where)
        return
    raise Invalid(f"Invalid type for '{where}.content': expected a string.", f"{where}.content")


def _validate_openai_tools(body: dict[str, Any]) -> None:
    if "tools" not in body:
        return
    tools = body["tools"]
    if not isinstance(tools, list):
        raise Invalid("Invalid type for 'tools': expected an array.", "tools")
    if not tools:
        raise Invalid(
            "Invalid 'tools': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            "tools",
        )
    if len(tools) > OPENAI_MAX_TOOLS:
        raise Invalid(
            f"Invalid 'tools': array too long. Expected an array with maximum length "
            f"{OPENAI_MAX_TOOLS}, but got an array with length {len(tools)} instead.",
            "tools",
        )
    for i, tool in enumerate(tools):
        at = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise Invalid(f"Missing required parameter: '{at}.type'.", f"{at}.type")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise Invalid(f"Missing required parameter: '{at}.function'.", f"{at}.function")
        name = function.get("name")
        if not isinstance(name, str):
            raise Invalid(f"Missing required parameter: '{at}.function.name'.", at)
        if len(name) > 64:
            raise Invalid(
                f"Invalid '{at}.function.name': string too long. Expected a string with "
                f"maximum length 64, but got a string with length {len(name)} instead.",
                f"{at}.function.name",
            )
        if not TOOL_NAME.match(name):
            raise Invalid(
                f"Invalid '{at}.function.name': string does not match pattern. Expected a "
                "string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                f"{at}.function.name",
            )
        parameters = function.get("parameters")
        if parameters is None:
            continue
        where = f"{at}.function.parameters"
        if not isinstance(parameters, dict):
            raise Invalid(
                f"Invalid schema for function '{name}': {json.dumps(parameters)} is not of "
                "type 'object', 'boolean'.",
                where,
                code="invalid_function_parameters",
            )
        problem = _schema_problem(parameters)
        if problem is not None:
            raise Invalid(
                f"Invalid schema for function '{name}': {problem}.",
                where,
                code="invalid_function_parameters",
            )
        if parameters.get("type") != "object":
            raise Invalid(
                f"Invalid schema for function '{name}': schema must be a JSON Schema of "
                f"'type: \"object\"', got 'type: \"{parameters.get('type')}\"'.",
                where,
                code="invalid_function_parameters",
            )
        if any(k in parameters for k in OPENAI_TOP_LEVEL_REFUSED):
            raise Invalid(
                f"Invalid schema for function '{name}': schema must have type 'object' and "
                "not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level.",
                where,
                code="invalid_function_parameters",
            )
