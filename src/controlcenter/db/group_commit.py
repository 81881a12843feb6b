"""Many callers' small writes in shared transactions (a group commit), used by the chat's
run writes.

One transaction at a time is open per group: the first write goes at once, alone; the writes
that arrive while it is under way go together in the next one. A shared transaction that fails
is tried again one write at a time, so that one write the database refuses fails alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from controlcenter.db.engine import Database

Item = TypeVar("Item")
Result = TypeVar("Result")
# Writes the items in the transaction of the session (`Database.write`) or of the driver's
# connection (`Database.write_driver`, with `driver=True`), in order; one result per item.
WriteAll = Callable[[Any, Sequence[Item]], Awaitable[Sequence[Result]]]
# What the items need before their transaction opens (a wait that must not hold the lock).
Before = Callable[[Sequence[Item]], Awaitable[None]]


class GroupCommit(Generic[Item, Result]):
    def __init__(
        self,
        db: Database,
        write: WriteAll[Item, Result],
        name: str,
        before: Before[Item] | None = None,
        *,
        driver: bool = False,
    ) -> None:
        """`before`, when given, runs before each transaction's attempt (a batch's, then each
        item's alone if the batch failed). `driver`: the writes get the driver's connection
        (`Database.write_driver`: on PostgreSQL in autocommit, so one statement each) instead
        of a session."""
        self._db = db
        self._driver = driver
        self._write = write
        self._before = before
        self._name = name
        self._queued: list[tuple[Item, asyncio.Future[Result]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        """`item` written in the next shared transaction; its result once committed. A caller
        cancelled before its transaction began is left out; after, its write stands."""
        done: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._queued.append((item, done))
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush(), name=self._name)
        return await done

    async def _flush(self) -> None:
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                await self._commit([(item, done) for item, done in batch if not done.done()])
        finally:
            self._flushing = None
            for _, done in self._queued:  # only when this task was cancelled: so are they
                done.cancel()
            self._queued = []

    async def _commit(self, batch: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        if not batch:
            return
        items = [item for item, _ in batch]
        try:
            if self._before is not None:
                await self._before(items)
            opened = self._db.write_driver() if self._driver else self._db.write()
            async with opened as connection:
                results = await self._write(connection, items)
        except Exception as exc:
            if len(batch) > 1:
                for one in batch:
                    await self._commit([one])
                return
            ((_, done),) = batch
            if not done.done():
                done.set_exception(exc)
            return
        except BaseException:
            for _, done in batch:  # cancelled with the loop: so are the writes that waited
                done.cancel()
            raise
        for (_, done), result in zip(batch, results, strict=True):
            if not done.done():
                done.set_result(result)
