"""The wake-ups between processes (chat.signals): on PostgreSQL, a write in one process wakes
the readers and runs of another through LISTEN/NOTIFY; SQLite has no notifications and its
readers poll (a short interval)."""

from __future__ import annotations

import asyncio

from controlcenter.chat import run_store
from controlcenter.chat.events import event_data, message_start
from controlcenter.chat.signals import SQLITE_POLL_S, Signals
from controlcenter.db import Database
from tests.conftest import RunningServer, UserFactory


async def test_another_process_wakes_readers_and_stops_runs(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    stops: list[str] = []
    # A second Database and Signals: what another process (or instance) holds.
    other_db = Database(server.db.url)
    here = Signals(server.db, on_stop=stops.append)
    try:
        if server.db.is_sqlite:
            assert here.poll_s == SQLITE_POLL_S
            return
        await here.listen()
        with here.watch("msg_1_signals00") as woken:
            first = (1, event_data(message_start("c", "msg_1_signals00")))
            await run_store.create_run(other_db, "msg_1_signals00", user.id, first)
            await asyncio.wait_for(woken.wait(), 5)
            woken.clear()
            await run_store.append_events(other_db, "msg_1_signals00", [(2, "{}")])
            await asyncio.wait_for(woken.wait(), 5)
        assert await run_store.request_stop(other_db, "msg_1_signals00", user.id) == (
            run_store.StopAnswer.ASKED
        )
        for _ in range(250):
            if stops:
                break
            await asyncio.sleep(0.02)
        assert stops == ["msg_1_signals00"]
    finally:
        await here.aclose()
        await other_db.dispose()
