"""The process's heartbeat on its running answers, beaten from a thread of its own.

Another process closes an answer as interrupted when its heartbeat is old (chat/liveness.py).
That must mean its process died, not that its event loop was busy: a thousand chats arriving
at once keep a loop saturated for longer than the stale limit, and a heartbeat written by the
loop would then let another process close answers that are still being written (their real
end then met the interrupted copy). A thread gets the interpreter every few milliseconds
whatever the loop does, and dies with the process, which is exactly the signal wanted.

The thread has its own event loop and its own engine on the same database (one connection).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from controlcenter.chat.models import RunningMessage
from controlcenter.common.logs import get_logger
from controlcenter.db import Database, utcnow

log = get_logger(__name__)


class Heartbeat:
    def __init__(
        self,
        url: str,
        owner: str,
        interval_s: float,
        has_rows: Callable[[], bool],
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        """`has_rows`: whether the process has running answers in the table (read from the
        thread; a wrong answer costs one idle write or one skipped beat, never a lost one:
        rows are written with a fresh heartbeat). `now`: the clock of the beats."""
        self.last_beat: datetime | None = None  # the time the last beat wrote
        self._now = now
        self._url = url
        self._owner = owner
        self._interval_s = interval_s
        self._has_rows = has_rows
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chat-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        with asyncio.Runner() as runner:
            db = Database(self._url)
            try:
                while True:
                    if self._has_rows():
                        try:
                            runner.run(self._beat(db))
                        except Exception:
                            log.exception("chat heartbeat: could not write; trying again")
                    if self._stop.wait(self._interval_s):
                        return
            finally:
                runner.run(db.dispose())

    async def _beat(self, db: Database) -> None:
        beat = self._now()
        await db.run_write(_beat_rows, self._owner, beat)
        self.last_beat = beat


def _beat_rows(session: Session, owner: str, beat: datetime) -> None:
    """The heartbeat of every liveness row of the process `owner`."""
    session.execute(
        update(RunningMessage).where(RunningMessage.owner == owner).values(heartbeat_at=beat)
    )
