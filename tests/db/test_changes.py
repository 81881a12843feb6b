"""The process's watch of the change stamps (`Changes`), on SQLite's polling path: a poll that
reads the stamps while this process commits a change of its own forgets nothing again; a
reaction ended is not called again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session

from controlcenter.db import Database
from controlcenter.db.changes import Changes, mark_changed
from controlcenter.db.migrate import upgrade

TOPIC = "things"


async def test_a_poll_overtaken_by_its_own_commit_forgets_nothing_more(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'changes.db'}"
    upgrade(url)
    db = Database(url)
    hold = asyncio.Event()  # set: the next read waits, its stamps read, until `go`
    held = asyncio.Event()
    go = asyncio.Event()
    reads = 0
    wanted = 0  # `enough` is set once this many reads have ended
    enough = asyncio.Event()

    async def read(work: Callable[[Session], dict[str, str]]) -> dict[str, str]:
        nonlocal reads
        stamps = await db.run_read(work)
        reads += 1
        if wanted and reads >= wanted:
            enough.set()
        if hold.is_set():
            hold.clear()
            held.set()
            await go.wait()
        return stamps

    changes = Changes(read, db.url, is_sqlite=True, poll_s=0.01)
    db.changes = changes  # the database's commits are this watch's own
    forgotten = 0

    def forget() -> None:
        nonlocal forgotten
        forgotten += 1

    changes.subscribe(TOPIC, forget)
    try:
        await changes.start()
        assert forgotten == 1  # the first read: nothing was known before it
        hold.set()
        await held.wait()  # a poll has read the stamps as they were before the commit
        await db.run_write(mark_changed, TOPIC)
        assert forgotten == 2  # the commit itself
        wanted = reads + 2  # the overtaken poll, then two more
        go.set()
        await enough.wait()
        assert forgotten == 2
    finally:
        await changes.stop()
        await db.dispose()


async def test_a_reaction_ended_is_not_called_again(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'changes.db'}"
    upgrade(url)
    db = Database(url)
    calls: list[str] = []
    end_first = db.changes.react(TOPIC, lambda: calls.append("first"))
    db.changes.react(TOPIC, lambda: calls.append("second"))
    try:
        await db.run_write(mark_changed, TOPIC)
        end_first()
        await db.run_write(mark_changed, TOPIC)
        assert calls == ["first", "second", "second"]
    finally:
        await db.dispose()
