"""A unit of work (`Database.run_write`, `run_read`): committed when it returns, rolled back
when it raises, and the topics it marked changed forgotten by this process's caches as soon as
it commits, even when its caller stopped waiting for it."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from controlcenter.db import Database
from controlcenter.db.changes import ChangeStamp, mark_changed


def _topic() -> str:
    """A topic of the test's own: the change stamps outlive a test (the tables' cleaning keeps
    them), so a shared one would carry one test's commit into the next."""
    return f"unit-{os.urandom(4).hex()}"


def _stamp(session: Session, topic: str) -> str | None:
    return session.scalar(select(ChangeStamp.stamp).where(ChangeStamp.topic == topic))


async def test_a_unit_that_raises_leaves_nothing(db: Database) -> None:
    topic = _topic()

    def change_then_fail(session: Session) -> None:
        mark_changed(session, topic)
        raise LookupError("no")

    with pytest.raises(LookupError):
        await db.run_write(change_then_fail)
    assert await db.run_read(_stamp, topic) is None
    await db.run_write(mark_changed, topic)
    assert await db.run_read(_stamp, topic) is not None


async def test_a_commit_is_forgotten_by_the_caches_even_if_its_caller_stopped_waiting(
    db: Database,
) -> None:
    topic = _topic()
    forgotten = asyncio.Event()
    db.changes.subscribe(topic, forgotten.set)
    inside, release = threading.Event(), threading.Event()

    def change(session: Session) -> None:
        mark_changed(session, topic)
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
        assert await db.run_read(_stamp, topic) is not None
    finally:
        release.set()


async def test_a_queued_write_whose_caller_is_cancelled_never_runs(db: Database) -> None:
    """SQLite: a write still waiting behind another when its caller goes is dropped; it never
    commits later. (PostgreSQL has no queue: a cancelled unit stops at its next statement.)"""
    if not db.is_sqlite:
        pytest.skip("SQLite's writes queue behind the process's one writer")
    topic = _topic()
    inside, release = threading.Event(), threading.Event()

    def hold(session: Session) -> None:
        inside.set()
        assert release.wait(60)

    first = asyncio.create_task(db.run_write(hold))
    try:
        assert await asyncio.to_thread(inside.wait, 60)
        queued = asyncio.create_task(db.run_write(mark_changed, topic))
        await asyncio.sleep(0.05)  # it is queued behind the first
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        await first
        await db.run_write(lambda session: None)  # whatever was queued has run by now
        assert await db.run_read(_stamp, topic) is None
    finally:
        release.set()
