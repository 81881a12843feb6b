"""A stop asked in another process reaches the run where it runs: on PostgreSQL by NOTIFY, on
SQLite by each process's poll, which reads only the running runs a stop was asked for (a
partial index), however many runs are open."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from sqlalchemy.dialects import sqlite

from controlcenter.chat import run_store
from controlcenter.chat.events import event_data, message_start
from controlcenter.chat.stream import STOP_POLL_S, ChatRuns
from controlcenter.db import Database
from controlcenter.db.migrate import upgrade
from tests.conftest import RunningServer, UserFactory


async def _run(db: Database, user_id: str, message_id: str) -> None:
    first = (1, event_data(message_start("c", message_id)))
    await run_store.create_run(db, message_id, user_id, first)


async def test_a_stop_asked_elsewhere_stops_the_run_here_and_no_other(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    here_db, there_db = Database(server.db.url), Database(server.db.url)
    here = ChatRuns(here_db)
    try:
        for message_id in ("msg_1_poll0000a", "msg_1_poll0000b"):
            await _run(here_db, user.id, message_id)
        stopped = await here.record("msg_1_poll0000a")
        going_on = await here.record("msg_1_poll0000b")
        asked = await run_store.request_stop(there_db, "msg_1_poll0000a", user.id)
        assert asked is run_store.StopAnswer.ASKED
        for _ in range(250):
            if stopped.stopped:
                break
            await asyncio.sleep(0.02)
        assert stopped.stopped
        assert not going_on.stopped
        assert await run_store.stops_asked(there_db) == ["msg_1_poll0000a"]
        # Ended, it is no longer polled for, stop flag or not.
        await run_store.append_events(there_db, "msg_1_poll0000a", [], status=run_store.STOPPED)
        assert await run_store.stops_asked(there_db) == []
    finally:
        here.forget(stopped)
        here.forget(going_on)
        await asyncio.sleep(2 * STOP_POLL_S)  # the poller sees no run left and ends
        await here.drain(1.0)
        await here_db.dispose()
        await there_db.dispose()


def test_sqlites_poll_reads_the_partial_index_only(tmp_path: Path) -> None:
    path = tmp_path / "poll.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    query = str(run_store._STOPS_ASKED.compile(dialect=sqlite.dialect()))
    with closing(sqlite3.connect(path)) as connection:
        plan = connection.execute(f"EXPLAIN QUERY PLAN {query}").fetchall()
    assert [row[3] for row in plan] == ["SCAN chat_runs USING INDEX ix_chat_runs_stops_asked"]
