"""The worker's small writes (outcomes, lease renewals) grouped into shared transactions.

Each was a write transaction of its own, and on SQLite every write transaction waits for the
database's one write lock beside the requests' saves (docs/outbox.md). Here one transaction at
a time is open per worker: the writes that arrive while it runs, or in the same turn of the
event loop as the first, go into the next one together. An idle worker's write therefore
waits for nothing more than before; a busy one's (the three jobs of a save end together, their
leases are renewed together) share one lock turn. Each write keeps its own statement and gets
its own row count, so a lease lost by one job is still seen by that job alone; a transaction
that fails fails each of its writes, which each caller handles as it did its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import Executable

from controlcenter.db import Database

_Write = tuple[Executable, dict[str, Any], "asyncio.Future[int]"]


class GroupCommit:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._queued: list[_Write] = []
        self._flushing: asyncio.Task[None] | None = None

    async def rowcount(self, statement: Executable, parameters: dict[str, Any]) -> int:
        """Run `statement` in the next shared transaction; the rows it matched once committed."""
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queued.append((statement, parameters, done))
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush(), name="outbox-group-commit")
        return await done

    async def _flush(self) -> None:
        try:
            while self._queued:
                writes, self._queued = self._queued, []
                await self._commit(writes)
        finally:
            self._flushing = None

    async def _commit(self, writes: list[_Write]) -> None:
        try:
            async with self._db.write() as session:
                connection = await session.connection()
                counts = [
                    int(getattr(await connection.execute(statement, parameters), "rowcount", 1))
                    for statement, parameters, _ in writes
                ]
        except BaseException as exc:
            for *_, done in writes:
                if not done.done():
                    if isinstance(exc, Exception):
                        done.set_exception(exc)
                    else:  # cancelled with the loop: so are the writes that waited for it
                        done.cancel()
            if isinstance(exc, Exception):
                return
            raise
        for (*_, done), count in zip(writes, counts, strict=True):
            if not done.done():  # its caller was cancelled meanwhile; the write stands
                done.set_result(count)
