"""A provider call's JSON body as bytes: the parts that do not change encoded once.

Within a chat (and across the chats offered one Toolbox) the model, the token cap, the system
prompt and the tool list (tens of kilobytes) are the same on every call; only the messages
change. The SDKs' `create` and streaming helpers deep-copy and encode all of it on every call
(docs/providers.md, "Request bodies"); here the fixed parts are encoded once per tool list, for
a whole answer and for a streamed one, and each call encodes only its messages. The bytes are
the ones the SDKs' own methods send: their encoder settings, the same keys in the same order
(tests/providers/test_request_bodies.py compares them).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from controlcenter.llm.types import ToolSpec

# Distinct tool lists alive at once: one per Toolbox the tool router hands out (it reuses one
# while the sources list the same tools), a few while an MCP server changes its list.
MAX_CACHED_TOOL_LISTS = 8


def encode(value: object) -> bytes:
    """JSON the way both SDKs encode a body (their `openapi_dumps`): UTF-8, no spaces, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True, slots=True)
class Body:
    """Everything of a body but its `messages`: the bytes before them and the bytes after."""

    head: bytes
    tail: bytes

    @classmethod
    def around(cls, before: dict[str, Any], after: dict[str, Any]) -> Body:
        """The body `{**before, "messages": ..., **after}`, with `messages` left open."""
        head = encode(before)[:-1] + b',"messages":' if before else b'{"messages":'
        tail = b"," + encode(after)[1:] if after else b"}"
        return cls(head, tail)

    def with_messages(self, messages: Sequence[object]) -> Parts:
        # The head (a few bytes: the token cap or the model) joined to the messages, the tail
        # (the tool list) shared: aiohttp sends each part with a system call of its own.
        return Parts((self.head + encode(messages), self.tail))


@dataclass(frozen=True, slots=True)
class Parts:
    """One call's body as its own bytes and the shared tail: sent part after part, never joined.

    A call waiting for the model holds its body for the SDK's retries; joined, that is a copy
    of the tool list per call in flight, the largest thing a held chat would keep. The parts
    are the call's encoded messages after the body's few leading bytes, and the tail of
    `BodyCache`, shared by every call.

    httpx sends an async iterable as chunks unless the request says its length, so `headers`
    gives the Content-Length the joined bytes would get: the request on the wire is the same.
    Iterable again and again (not a generator), so each retry sends the same bytes.
    """

    parts: tuple[bytes, ...]

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)

    def __len__(self) -> int:
        return sum(map(len, self.parts))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part

    @property
    def headers(self) -> dict[str, str]:
        return {"Content-Length": str(len(self))}


@dataclass(frozen=True, slots=True)
class Fixed:
    """One system prompt's and tool list's bodies: for a whole answer and for a streamed one
    (the same fields, and `stream` with what streaming asks for besides)."""

    whole: Body
    streamed: Body


class BodyCache:
    """The fixed parts of one provider's bodies, by system prompt and tool list.

    The tool list is recognised by identity, and only when it is a tuple: the chat loop offers
    `Toolbox.specs`, a tuple of frozen ToolSpecs that the tool router reuses, so the same object
    means the same tools. A list could change between two calls, so it is encoded each time.
    The entry keeps the tuple itself, so its id cannot be reused by another while cached.
    """

    def __init__(
        self, build: Callable[[str, Sequence[ToolSpec]], Fixed], size: int = MAX_CACHED_TOOL_LISTS
    ) -> None:
        self._build = build
        self._bodies: LRUCache[tuple[int, str], tuple[Sequence[ToolSpec], Fixed]] = LRUCache(size)

    def get(self, system: str, tools: Sequence[ToolSpec]) -> Fixed:
        if not isinstance(tools, tuple):
            return self._build(system, tools)
        key = (id(tools), system)
        entry = self._bodies.get(key)
        if entry is None or entry[0] is not tools:
            entry = self._bodies[key] = (tools, self._build(system, tools))
        return entry[1]
