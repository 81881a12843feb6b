"""The wake-ups between processes (chat.signals): on PostgreSQL, a write in one process wakes
the readers and runs of another through LISTEN/NOTIFY; SQLite has no notifications and its
readers poll (a short interval)."""

from __future__ import annotations

import asyncio

from controlcenter.chat import store
from controlcenter.chat.events import content_delta, event_data
from controlcenter.chat.signals import SQLITE_POLL_S, Signals
from controlcenter.chat.store import EventWriter
from controlcenter.db import Database
from tests.conftest import RunningServer, UserFactory


async def test_another_process_wakes_readers_and_stops_runs(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    stops: list[str] = []
    stopped = asyncio.Event()

    def on_stop(message_id: str) -> None:
        stops.append(message_id)
        stopped.set()

    # A second Database and Signals: what another process (or instance) holds.
    other_db = Database(server.db.url)
    other = EventWriter(other_db, Signals(other_db, on_stop=lambda _: None))
    here = Signals(server.db, on_stop=on_stop)
    message_id = "msg_1_signals00"
    try:
        if server.db.is_sqlite:
            assert here.poll_s == SQLITE_POLL_S
            return
        await here.listen()
        with here.watch(message_id) as woken:
            await store.start_turn(
                other_db, user_id=user.id, conversation_id=None, message="x", answer_id=message_id
            )
            await woken.wait()
            woken.clear()
            other.add(message_id, (2, event_data(content_delta("y"))))
            await other.close(10.0)
            await woken.wait()
        asked = await store.request_stop(other_db, message_id, user.id)
        assert asked == store.StopAnswer.ASKED
        await stopped.wait()
        assert stops == [message_id]
    finally:
        await here.aclose()
        await other_db.dispose()
