"""A stop asked in another process reaches the run where it runs: on PostgreSQL by NOTIFY, on
SQLite through the stop flags' change stamp, which each process's watch of the stamps sees
move, and then one read of only the running runs a stop was asked for (a partial index),
however many runs are open; while nobody stops anything, a run costs no read of its own."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from sqlalchemy import Select, event
from sqlalchemy.dialects import sqlite

from controlcenter.chat.channel import EventChannel
from controlcenter.chat.liveness import RUNS_WITHOUT_ROW
from controlcenter.chat.models import STOPPED
from controlcenter.chat.run.commands import StopAnswer, request_stop
from controlcenter.chat.run.runs import ChatRuns
from controlcenter.chat.signals import ASKED_STOPS, Signals
from controlcenter.db import Database, utcnow
from controlcenter.db.migrate import upgrade
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import reading


async def test_a_stop_asked_elsewhere_stops_the_run_here_and_no_other(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    here_db, there_db = Database(server.db.url), Database(server.db.url)
    await here_db.changes.start()  # as the app does: its caches and stop flags are watched
    here = ChatRuns(here_db)
    stopped = going_on = None
    try:
        stopped = await here.begin(user.id, None, "stop me", EventChannel())
        going_on = await here.begin(user.id, None, "go on", EventChannel())
        assert stopped is not None and going_on is not None
        there = Signals(there_db)  # another process's
        asked = await request_stop(there_db, there, stopped.message_id, user.id)
        assert asked is StopAnswer.ASKED
        # What the run's loop does while its provider answers: it waits until a stop comes.
        assert await stopped.unless_stopped(asyncio.Event().wait()) is None
        assert not going_on.stopped
        assert await _stops_asked(there_db) == [stopped.message_id]
        # Ended, it is no longer read, stop flag or not.
        await stopped.finish(STOPPED)
        assert await _stops_asked(there_db) == []
    finally:
        for run in (stopped, going_on):
            if run is not None:
                run.dismiss()
        await here.drain(1.0)
        await here_db.dispose()
        await there_db.dispose()


async def test_a_waiting_run_reads_no_stop_flags_while_nobody_stops(
    server: RunningServer, users: UserFactory
) -> None:
    """SQLite: while a run waits for its provider, its process reads the change stamps it
    reads anyway, and not the stop flags, until a stop moves their stamp."""
    if not server.db.is_sqlite:
        return  # PostgreSQL: the stop is notified
    user = await users.create()
    db = Database(server.db.url)
    seen: list[str] = []
    stamps_read = asyncio.Event()

    loop = asyncio.get_running_loop()

    def note(conn: object, cursor: object, statement: str, *args: object) -> None:
        # In the thread of the reads.
        seen.append(statement)
        if seen.count(_STAMPS_READ) >= 3:
            loop.call_soon_threadsafe(stamps_read.set)

    await db.changes.start()
    event.listen(db.read_engine, "before_cursor_execute", note)
    runs = ChatRuns(db)
    run = None
    try:
        run = await runs.begin(user.id, None, "wait", EventChannel())
        assert run is not None
        await stamps_read.wait()  # the watch read the stamps again (twice) meanwhile
        assert not [s for s in seen if "stop_requested" in s]
        await request_stop(db, runs.signals, run.message_id, user.id)
        assert await run.unless_stopped(asyncio.Event().wait()) is None
    finally:
        event.remove(db.read_engine, "before_cursor_execute", note)
        if run is not None:
            run.dismiss()
        await runs.drain(1.0)
        await db.dispose()


_STAMPS_READ = "SELECT change_stamps.topic, change_stamps.stamp \nFROM change_stamps"


async def _stops_asked(db: Database) -> list[str]:
    """What a process reads when the stop flags' stamp moved: the running runs a stop was
    asked for."""
    async with reading(db) as session:
        return list(await session.scalars(ASKED_STOPS))


def _plan(path: Path, query: Select[str], *params: object) -> list[str]:
    """SQLite's plan of `query` on the migrated database at `path`."""
    compiled = query.compile(dialect=sqlite.dialect())
    with closing(sqlite3.connect(path)) as connection:
        rows = connection.execute(f"EXPLAIN QUERY PLAN {compiled}", params).fetchall()
    return [row[3] for row in rows]


def test_sqlites_read_of_the_stop_flags_uses_the_partial_index_only(tmp_path: Path) -> None:
    path = tmp_path / "poll.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    plan = _plan(path, ASKED_STOPS)
    assert plan == ["SCAN chat_runs USING INDEX ix_chat_runs_stops_asked"]
    # The liveness task's look for running runs without a row reads its own partial index.
    later = _plan(path, RUNS_WITHOUT_ROW, utcnow().isoformat())
    assert later[0] == "SEARCH chat_runs USING INDEX ix_chat_runs_running (created_at<?)"
