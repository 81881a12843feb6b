"""What the two SDK providers share: how they are built, and the SDKs' failures as ProviderError.

Both official SDKs (anthropic, openai) come from one generator: the same client options and
the same exception classes under the same names. So one base class builds either provider's
pooled clients, and one context manager turns either SDK's exceptions into the words the chat
shows, with the key redacted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, cast

import httpx2

from controlcenter.common.secrets import redact
from controlcenter.providers.base import ProviderError
from controlcenter.providers.clients import POOL_LIMITS, K, PooledClients
from controlcenter.providers.history import CONNECTION_MESSAGE, TIMEOUT_MESSAGE


@dataclass(frozen=True)
class ProviderOptions:
    """How one provider reaches its API (from the deployment's configuration)."""

    base_url: str
    model: str
    timeout_s: float
    max_retries: int
    max_tokens: int


class SdkProvider(Generic[K]):
    """The model, the token cap and one client per key over one connection pool."""

    def __init__(
        self,
        options: ProviderOptions,
        sdk: Callable[..., K],
        http: Callable[..., httpx2.AsyncClient],
    ) -> None:
        self._model = options.model
        self._max_tokens = options.max_tokens
        self._clients = PooledClients(
            sdk,
            http(limits=POOL_LIMITS, timeout=options.timeout_s),
            base_url=options.base_url,
            timeout_s=options.timeout_s,
            max_retries=options.max_retries,
        )

    async def aclose(self) -> None:
        await self._clients.aclose()


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
    except errors.timeout:
        raise ProviderError(TIMEOUT_MESSAGE, None) from None
    except errors.connection:
        raise ProviderError(CONNECTION_MESSAGE, None) from None
    except errors.other as exc:  # a reply the SDK could not read
        message = cast(_StatusError, exc).message
        raise ProviderError(redact(message, api_key), None) from None


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
