"""What the two SDK providers share: how they are built, how a call runs, and the SDKs' failures
as ProviderError.

Both official SDKs (anthropic, openai) come from one generator: the same client options, the
same low-level `post`, and the same exception classes under the same names. So one base class
builds either provider's pooled clients and runs either provider's calls (`complete` and
`stream` are written once, here), and one context manager turns either SDK's exceptions into
the words the chat shows, with the key redacted. Each provider module says only what differs:
its messages, its body's fixed parts, how it posts and streams, how it reads the reply.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar, cast

import httpx2

from controlcenter.common.secrets import redact
from controlcenter.llm.types import ProviderReply, ToolSpec, Turn
from controlcenter.observability import tracing
from controlcenter.providers.base import ProviderError
from controlcenter.providers.body import BodyCache, Fixed, Parts
from controlcenter.providers.clients import K, PooledClients, shard_limits
from controlcenter.providers.history import (
    CONNECTION_MESSAGE,
    EMPTY_MESSAGE,
    TIMEOUT_MESSAGE,
    UNREADABLE_MESSAGE,
)

# One message in the provider's native form (the SDK's TypedDict).
M = TypeVar("M", bound=Mapping[str, object])
Tools = Sequence[ToolSpec]
OnText = Callable[[str], None]


@dataclass(frozen=True)
class ProviderOptions:
    """How one provider reaches its API (from the deployment's configuration)."""

    base_url: str
    model: str
    timeout_s: float
    max_retries: int
    max_tokens: int


class SdkProvider(ABC, Generic[K, M]):
    """The model, the token cap, one client per key over one connection pool, and the calls.

    Both calls send the body as bytes through the SDK's documented low-level `post`, `stream`
    with the SDK's own stream class (retries, auth headers, timeouts, error classes, reply and
    event parsing stay the SDK's; see docs/providers.md, "Request bodies"). The HTTP pools are
    the SDK's aiohttp transport (`DefaultAioHttpClient`), which its README recommends for
    concurrency.
    """

    errors: ClassVar[SdkErrors]

    def __init__(
        self,
        options: ProviderOptions,
        sdk: Callable[..., K],
        http: Callable[..., httpx2.AsyncClient],
    ) -> None:
        self._model = options.model
        self._max_tokens = options.max_tokens
        # One TLS context for all the pools: each pool building its own (httpx's `verify=True`)
        # would load the system's CA bundle again, and a pool opens per SHARD_CALLS calls in
        # flight, so every held chat would carry a share of a CA bundle.
        tls = httpx2.create_ssl_context()
        self._clients = PooledClients(
            sdk,
            lambda: tracing.traced(
                http(limits=shard_limits(), timeout=options.timeout_s, verify=tls)
            ),
            base_url=options.base_url,
            timeout_s=options.timeout_s,
            max_retries=options.max_retries,
        )
        self._bodies = BodyCache(self._fixed)

    async def complete(
        self,
        *,
        api_key: str,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[ToolSpec],
    ) -> ProviderReply:
        messages = self._sendable(system, turns)
        body = self._bodies.get(system, tools).whole.with_messages(messages)
        with self._clients.lease(api_key) as client, sdk_errors(self.errors, api_key):
            return await self._post(client, body)

    async def stream(
        self,
        *,
        api_key: str,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[ToolSpec],
        on_text: Callable[[str], None],
    ) -> ProviderReply:
        """The same request in streaming mode (`?deltas=tokens`): `on_text` gets each piece."""
        messages = self._sendable(system, turns)
        body = self._bodies.get(system, tools).streamed.with_messages(messages)
        with self._clients.lease(api_key) as client, sdk_errors(self.errors, api_key):
            return await self._stream(client, body, on_text)

    async def list_models(self, *, api_key: str, timeout_s: float) -> int:
        """How many models the key may use (the first page of the API's models list, through
        the SDK's own `models.list()`): a call that checks the key and costs nothing. One
        attempt within `timeout_s`; the SDK's failures as ProviderError, the key redacted."""
        with self._clients.lease(api_key) as client, sdk_errors(self.errors, api_key):
            once: Any = cast(Any, client).with_options(timeout=timeout_s, max_retries=0)
            page = await once.models.list()
            return len(page.data)

    async def aclose(self) -> None:
        await self._clients.aclose()

    def _sendable(self, system: str, turns: Sequence[Turn]) -> list[M]:
        messages = self._messages(system, turns)
        # The APIs reject a request with nothing to answer (no message, or only OpenAI's
        # system one): fail before calling them.
        if all(message["role"] == "system" for message in messages):
            raise ProviderError(EMPTY_MESSAGE, None)
        return messages

    @abstractmethod
    def _messages(self, system: str, turns: Sequence[Turn]) -> list[M]:
        """The history (and, where the API wants it there, the system prompt) as messages."""

    @abstractmethod
    def _fixed(self, system: str, tools: Tools) -> Fixed:
        """The bodies' parts around `messages`: the same on every call of a chat."""

    @abstractmethod
    async def _post(self, client: K, body: Parts) -> ProviderReply:
        """Send the encoded body with the SDK's `post` (its headers in the request options)
        and read its reply."""

    @abstractmethod
    async def _stream(self, client: K, body: Parts, on_text: OnText) -> ProviderReply:
        """Send the encoded streaming body with the SDK's `post` and its stream class; each
        piece of text goes to `on_text`."""


class SdkErrors(NamedTuple):
    """One SDK's exception classes (subclasses first: a timeout is a connection error, and
    both, like a status error, are API errors)."""

    status: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]
    other: type[Exception]


class _StatusError(Protocol):
    status_code: int
    body: object
    message: str


@contextmanager
def sdk_errors(errors: SdkErrors, api_key: str) -> Iterator[None]:
    """The SDK's exceptions raised inside as ProviderError with the key redacted.

    `from None`: the SDK's exception text may quote the key (OpenAI's 401 quotes part of it),
    so it is kept out of tracebacks.
    """
    try:
        yield
    except errors.status as exc:
        status = cast(_StatusError, exc)
        raise ProviderError(redact(api_message(status), api_key), status.status_code) from None
    except errors.timeout as exc:
        message = CONNECTION_MESSAGE if _refused(exc) else TIMEOUT_MESSAGE
        raise ProviderError(message, None) from None
    except errors.connection:
        raise ProviderError(CONNECTION_MESSAGE, None) from None
    except errors.other as exc:  # a reply the SDK could not read
        message = cast(_StatusError, exc).message
        raise ProviderError(redact(message, api_key), None) from None
    except json.JSONDecodeError:  # a body declared JSON that is not (the SDK lets it through)
        raise ProviderError(UNREADABLE_MESSAGE, None) from None


def _refused(exc: BaseException) -> bool:
    """Whether a timeout the SDK reports came of a connection that failed at once (refused,
    unreachable): openai's aiohttp transport maps every aiohttp connection error to a connect
    timeout, and the exceptions it was raised from say which it was. An OSError that is not a
    TimeoutError is a connection that failed, not one that took too long."""
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return True
        cause = cause.__cause__
    return False


def api_message(exc: _StatusError) -> str:
    """The API's own `error.message` when the body has one, else the SDK's summary."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message")
            if isinstance(message, str) and message:
                return message
    return exc.message
