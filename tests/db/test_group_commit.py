"""The group commit (db.group_commit): a lone write goes at once; the writes that arrive while
one is under way share the next transaction, each with its own result; a write the database
refuses fails alone; a caller cancelled before its transaction is left out. On both
databases."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import cast

import pytest
from sqlalchemy import Table, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.crm.rate_limit import CrmRateBucket
from controlcenter.db import Database
from controlcenter.db.group_commit import GroupCommit

# SQLAlchemy types a model's `__table__` as any FROM clause; a declarative model's is a Table.
_buckets = cast(Table, CrmRateBucket.__table__)


@pytest.fixture(autouse=True)
async def no_buckets(db: Database) -> None:
    async with db.write() as session:
        await session.execute(_buckets.delete())


class Writes:
    """Each item a row (its key); the transactions opened, and what each one held."""

    def __init__(self, db: Database) -> None:
        self.batches: list[list[str]] = []
        self.hold: asyncio.Event | None = None
        self.group: GroupCommit[str, int] = GroupCommit(db, self.write, "test-group")

    async def first_under_way(self, key: str) -> asyncio.Task[int]:
        """`key` submitted, once its transaction is open and held (until `hold` is set)."""
        self.hold = asyncio.Event()
        first = asyncio.create_task(self.group.submit(key))
        for _ in range(100):
            if self.batches:
                break
            await asyncio.sleep(0.01)
        return first

    async def write(self, session: AsyncSession, keys: Sequence[str]) -> list[int]:
        self.batches.append(list(keys))
        if self.hold is not None:
            await self.hold.wait()
        now = datetime.now(UTC)
        for key in keys:
            await session.execute(
                insert(_buckets).values(location_id=key, tokens=1, updated_at=now)
            )
        return [len(key) for key in keys]


async def _stored(db: Database) -> list[str]:
    async with db.read() as session:
        return sorted(await session.scalars(select(_buckets.c.location_id)))


async def test_writes_arriving_during_one_share_the_next_transaction(db: Database) -> None:
    writes = Writes(db)
    first = await writes.first_under_way("a")
    others = [asyncio.create_task(writes.group.submit(key)) for key in ("bb", "ccc", "dddd")]
    await asyncio.sleep(0.05)
    assert writes.batches == [["a"]] and not first.done()
    assert writes.hold is not None
    writes.hold.set()
    assert await asyncio.wait_for(asyncio.gather(first, *others), 5) == [1, 2, 3, 4]
    assert writes.batches == [["a"], ["bb", "ccc", "dddd"]]
    assert await _stored(db) == ["a", "bb", "ccc", "dddd"]


async def test_a_refused_write_fails_alone_and_the_others_are_stored(db: Database) -> None:
    async with db.write() as session:
        await session.execute(
            insert(_buckets).values(location_id="taken", tokens=1, updated_at=datetime.now(UTC))
        )
    writes = Writes(db)
    results = await asyncio.gather(
        *(writes.group.submit(key) for key in ("x", "taken", "zz")), return_exceptions=True
    )
    assert results[0] == 1 and results[2] == 2
    assert isinstance(results[1], IntegrityError)
    # The shared transaction, then each write alone.
    assert writes.batches == [["x", "taken", "zz"], ["x"], ["taken"], ["zz"]]
    assert await _stored(db) == ["taken", "x", "zz"]


async def test_a_caller_cancelled_before_its_transaction_is_left_out(db: Database) -> None:
    writes = Writes(db)
    first = await writes.first_under_way("a")
    gone = asyncio.create_task(writes.group.submit("gone"))
    kept = asyncio.create_task(writes.group.submit("kept"))
    await asyncio.sleep(0.01)
    gone.cancel()
    assert writes.hold is not None
    writes.hold.set()
    assert list(await asyncio.wait_for(asyncio.gather(first, kept), 5)) == [1, 4]
    assert writes.batches == [["a"], ["kept"]]
    assert await _stored(db) == ["a", "kept"]
