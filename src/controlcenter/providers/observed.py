"""A provider as operators see it (CONTRACT 13): each call counted by status, timed, and
traced as a span. Wraps any Provider, so the adapters stay as they are."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from controlcenter.llm.types import ProviderReply, ToolSpec, Turn
from controlcenter.observability import tracing
from controlcenter.observability.metrics import PROVIDER_CALLS, PROVIDER_DURATION
from controlcenter.providers.base import Provider, ProviderError, StreamingProvider


class ObservedProvider:
    """Counts and traces `complete` and, for the adapters that have it, `stream` (token
    streaming, CONTRACT 11): a wrapper without `stream` would turn `?deltas=tokens` off."""

    __slots__ = ("_inner", "_name")

    def __init__(self, name: str, inner: Provider) -> None:
        self._name = name
        self._inner = inner

    @property
    def inner(self) -> Provider:
        return self._inner

    async def complete(
        self, *, api_key: str, system: str, turns: Sequence[Turn], tools: Sequence[ToolSpec]
    ) -> ProviderReply:
        return await self._observe(
            lambda: self._inner.complete(api_key=api_key, system=system, turns=turns, tools=tools)
        )

    async def stream(
        self,
        *,
        api_key: str,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[ToolSpec],
        on_text: Callable[[str], None],
    ) -> ProviderReply:
        streaming = cast(StreamingProvider, self._inner)
        return await self._observe(
            lambda: streaming.stream(
                api_key=api_key, system=system, turns=turns, tools=tools, on_text=on_text
            )
        )

    async def _observe(self, call: Callable[[], Awaitable[ProviderReply]]) -> ProviderReply:
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
