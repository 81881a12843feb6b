"""A unit of work (`Database.run_write`, `run_read`): committed when it returns, rolled back
when it raises, and the topics it marked changed forgotten by this process's caches as soon as
it commits, even when its caller stopped waiting for it."""

from __future__ import annotations

import asyncio
import threading

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from controlcenter.db import Database
from controlcenter.db.changes import ChangeStamp, mark_changed

TOPIC = "unit-things"


def _stamp(session: Session) -> str | None:
    return session.scalar(select(ChangeStamp.stamp).where(ChangeStamp.topic == TOPIC))


async def test_a_unit_that_raises_leaves_nothing(db: Database) -> None:
    def change_then_fail(session: Session) -> None:
        mark_changed(session, TOPIC)
        raise LookupError("no")

    with pytest.raises(LookupError):
        await db.run_write(change_then_fail)
    assert await db.run_read(_stamp) is None
    await db.run_write(mark_changed, TOPIC)
    assert await db.run_read(_stamp) is not None


async def test_a_commit_is_forgotten_by_the_caches_even_if_its_caller_stopped_waiting(
    db: Database,
) -> None:
    forgotten = asyncio.Event()
    db.changes.subscribe(TOPIC, forgotten.set)
    inside, release = threading.Event(), threading.Event()

    def change(session: Session) -> None:
        mark_changed(session, TOPIC)
        inside.set()
        assert release.wait(60)

    unit = asyncio.create_task(db.run_write(change))
    try:
        if db.is_sqlite:
            assert await asyncio.to_thread(inside.wait, 60)
            unit.cancel()  # the caller goes; the unit, already running, commits all the same
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await unit
        else:
            release.set()
            await unit
        await asyncio.wait_for(forgotten.wait(), 60)
        assert await db.run_read(_stamp) is not None
    finally:
        release.set()
