"""The worker's small writes (outcomes, lease renewals) grouped into shared transactions.

Each was a write transaction of its own, and on SQLite every write transaction waits for the
database's one write lock beside the requests' saves (docs/outbox.md). Here one transaction at
a time is open per worker (`db.group_commit`): the writes that arrive while it runs, or in the
same turn of the event loop as the first, go into the next one together. An idle worker's
write therefore waits for nothing more than before; a busy one's (the three jobs of a save end
together, their leases are renewed together) share one lock turn. Each write keeps its own
statement and gets its own row count, so a lease lost by one job is still seen by that job
alone; a write the database refuses fails alone, which its caller handles as it did its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Executable
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.db import Database
from controlcenter.db.group_commit import GroupCommit as Grouped

_Write = tuple[Executable, dict[str, Any]]


class GroupCommit:
    def __init__(self, db: Database) -> None:
        self._grouped: Grouped[_Write, int] = Grouped(db, _execute, "outbox-group-commit")

    async def rowcount(self, statement: Executable, parameters: dict[str, Any]) -> int:
        """Run `statement` in the next shared transaction; the rows it matched once committed."""
        return await self._grouped.submit((statement, parameters))


async def _execute(session: AsyncSession, writes: Sequence[_Write]) -> list[int]:
    connection = await session.connection()
    return [
        int(getattr(await connection.execute(statement, parameters), "rowcount", 1))
        for statement, parameters in writes
    ]
