"""ObservedProvider wraps the adapter's own methods: counted, and `stream` only where the
adapter has it (the chat loop turns `?deltas=tokens` off without it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from prometheus_client import REGISTRY

from controlcenter.llm.types import ProviderReply, ToolSpec, Turn, UserTurn
from controlcenter.providers.base import ProviderError
from controlcenter.providers.observed import ObservedProvider


class CompleteOnly:
    def __init__(self, error: ProviderError | None = None) -> None:
        self.error = error

    async def complete(
        self, *, api_key: str, system: str, turns: Sequence[Turn], tools: Sequence[ToolSpec]
    ) -> ProviderReply:
        if self.error is not None:
            raise self.error
        return ProviderReply(text=f"{api_key}:{system}:{len(turns)}:{len(tools)}")


class Streaming(CompleteOnly):
    async def stream(self, **kwargs: Any) -> ProviderReply:
        kwargs["on_text"]("piece")
        return ProviderReply(text="piece")


def calls(name: str, status: str) -> float | None:
    labels = {"provider": name, "status": status}
    return REGISTRY.get_sample_value("controlcenter_provider_calls_total", labels)


async def test_stream_only_where_the_adapter_has_it() -> None:
    assert getattr(ObservedProvider("t_plain", CompleteOnly()), "stream", None) is None
    observed = ObservedProvider("t_streaming", Streaming())
    pieces: list[str] = []
    reply = await observed.stream(
        api_key="k", system="s", turns=[UserTurn("hi")], tools=[], on_text=pieces.append
    )
    assert (reply.text, pieces) == ("piece", ["piece"])
    assert calls("t_streaming", "ok") == 1


async def test_complete_passes_its_arguments_and_counts_by_status() -> None:
    observed = ObservedProvider("t_complete", CompleteOnly())
    reply = await observed.complete(api_key="k", system="s", turns=[UserTurn("a")], tools=[])
    assert reply.text == "k:s:1:0"
    failing = ObservedProvider("t_failing", CompleteOnly(ProviderError("Overloaded", 529)))
    with pytest.raises(ProviderError):
        await failing.complete(api_key="k", system="s", turns=[], tools=[])
    assert (calls("t_complete", "ok"), calls("t_failing", "529")) == (1, 1)
