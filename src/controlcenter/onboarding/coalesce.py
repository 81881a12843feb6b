"""Deliveries that start together for one key share one send (docs/outbox.md, "One broker's
jobs together").

The worker starts every job of a claim as a task in one go, so the jobs of one save (claimed
together: they have the same `next_attempt_at`) all reach `join` in the same turn of the event
loop, before any of them has awaited anything. The first to join opens a batch and creates the
task that sends it; a task created in that turn runs only after every task already scheduled
for it, so by the time the send starts, the others have joined. Whoever joins later opens the
next batch: nothing waits for a batch to fill.

Each job keeps its own task, lease, timeout and outcome: the send answers one outcome per part
(None: delivered), and each job raises its own. The send belongs to no job: a job cancelled
while waiting (its lease lost, the worker stopping) leaves it to the others, and a send that
nobody waits for any more is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
P = TypeVar("P")

Outcomes = Sequence[BaseException | None]


class _Batch(Generic[P]):
    def __init__(self) -> None:
        self.parts: list[P] = []
        self.waiting = 0
        self.send: asyncio.Task[Outcomes] | None = None


class Coalescer(Generic[K, P]):
    """`join(key, part)` returns when `send(key, parts)` has delivered the batch its part went
    into, or raises the part's own failure."""

    def __init__(self, send: Callable[[K, list[P]], Awaitable[Outcomes]]) -> None:
        self._send = send
        self._open: dict[K, _Batch[P]] = {}

    async def join(self, key: K, part: P) -> None:
        batch = self._open.get(key)
        if batch is None:
            batch = self._open[key] = _Batch()
            batch.send = asyncio.create_task(self._run(key, batch), name=f"batch-{key}")
        index = len(batch.parts)
        batch.parts.append(part)
        batch.waiting += 1
        assert batch.send is not None
        try:
            outcomes = await asyncio.shield(batch.send)
        except asyncio.CancelledError:
            batch.waiting -= 1
            if batch.waiting == 0:
                batch.send.cancel()
                if self._open.get(key) is batch:  # cancelled before it started
                    del self._open[key]
            raise
        batch.waiting -= 1
        outcome = outcomes[index]
        if outcome is not None:
            raise outcome

    async def _run(self, key: K, batch: _Batch[P]) -> Outcomes:
        # Closed before the first await: a job joining from here on opens the next batch.
        del self._open[key]
        outcomes = await self._send(key, list(batch.parts))
        assert len(outcomes) == len(batch.parts)
        return outcomes
