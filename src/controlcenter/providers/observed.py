"""A provider as operators see it: each call counted by status, timed, and
traced as a span. Wraps any Provider, so the adapters stay as they are."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, cast

from controlcenter.llm.types import ProviderReply
from controlcenter.observability import tracing
from controlcenter.observability.metrics import PROVIDER_CALLS, PROVIDER_DURATION
from controlcenter.providers.base import Provider, ProviderError, StreamingProvider

P = ParamSpec("P")
Asked = Coroutine[Any, Any, ProviderReply]  # what an adapter's `complete` or `stream` returns


class ObservedProvider:
    """Counts and traces `complete` and, for the adapters that have it, `stream` (token
    streaming, `?deltas=tokens`): without `stream` the chat loop turns `?deltas=tokens` off, so
    the wrapper has it exactly when the adapter has.

    Each method is the adapter's own, wrapped (`_observed` keeps its signature for the type
    checker), so the protocol's signatures are not written out again here.
    """

    __slots__ = ("_inner", "_name", "complete", "stream")

    def __init__(self, name: str, inner: Provider) -> None:
        self._name = name
        self._inner = inner
        self.complete = self._observed(inner.complete)
        if getattr(inner, "stream", None) is not None:
            self.stream = self._observed(cast(StreamingProvider, inner).stream)

    @property
    def inner(self) -> Provider:
        return self._inner

    def _observed(self, call: Callable[P, Asked]) -> Callable[P, Asked]:
        async def observed(*args: P.args, **kwargs: P.kwargs) -> ProviderReply:
            return await self._observe(lambda: call(*args, **kwargs))

        return observed

    async def _observe(self, call: Callable[[], Asked]) -> ProviderReply:
        started = time.perf_counter()
        status = "error"
        with tracing.span("provider call", **{"provider.name": self._name}) as current:
            try:
                reply = await call()
                status = "ok"
                return reply
            except ProviderError as exc:
                if exc.status_code is not None:
                    status = str(exc.status_code)
                tracing.fail(current, f"provider error {status}")
                raise
            finally:
                PROVIDER_CALLS.labels(self._name, status).inc()
                PROVIDER_DURATION.labels(self._name).observe(time.perf_counter() - started)

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


def observed(providers: dict[str, Provider]) -> dict[str, Provider]:
    return {name: ObservedProvider(name, provider) for name, provider in providers.items()}
