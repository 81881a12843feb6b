"""The wake-ups between processes (chat.signals): on PostgreSQL, a write in one process wakes
the readers and runs of another through LISTEN/NOTIFY; SQLite has no notifications and its
readers poll (a short interval)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from controlcenter.chat.events import content_delta, event_data
from controlcenter.chat.run.commands import StopAnswer, request_stop
from controlcenter.chat.run.start import start_turn
from controlcenter.chat.run.writer import EventWriter
from controlcenter.chat.signals import SQLITE_POLL_S, STOPS, Signals
from controlcenter.db import Database
from controlcenter.db.migrate import upgrade
from tests.conftest import RunningServer, UserFactory


async def test_another_process_wakes_readers_and_stops_runs(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    # A second Database and Signals: what another process (or instance) holds.
    other_db = Database(server.db.url)
    other = EventWriter(other_db, Signals(other_db))
    here = Signals(server.db)
    message_id = "msg_1_signals00"
    flags = here.enlist(message_id)  # a run of this process
    try:
        if server.db.is_sqlite:
            assert here.poll_s == SQLITE_POLL_S
            return
        await here.listen()
        with here.watch(message_id) as woken:
            await start_turn(
                other_db, user_id=user.id, conversation_id=None, message="x", answer_id=message_id
            )
            await woken.wait()
            woken.clear()
            other.add(message_id, (2, event_data(content_delta("y"))))
            await other.close(10.0)
            await woken.wait()
        asked = await request_stop(other_db, Signals(other_db), message_id, user.id)
        assert asked == StopAnswer.ASKED
        await flags.stop.wait()  # told through the notification
    finally:
        await here.aclose()
        await other_db.dispose()


async def test_disposing_the_database_under_enlisted_runs_leaves_no_reader_behind(
    tmp_path: Path,
) -> None:
    """SQLite: disposing a process's database changes no stop flag, so with runs still
    enlisted (never `aclose`d) nothing starts to read them; and a read of the flags begun after
    it ends instead of retrying for the process's whole life."""
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'signals.db'}")
    upgrade(database.url)
    await database.changes.start()
    signals = Signals(database)
    signals.enlist("msg_1_disposed0")
    await database.dispose()
    assert signals._stop_reader is None
    database.changes.changed([STOPS])  # a change that would come too late
    reader = signals._stop_reader
    assert reader is not None
    await asyncio.wait_for(reader, 10)
    assert signals._stop_reader is None
