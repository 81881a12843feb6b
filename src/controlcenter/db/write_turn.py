"""Whose turn it is to write a SQLite database, among the processes that share it.

SQLite has one writer at a time. `Database.write` asks for the write lock with BEGIN IMMEDIATE
without waiting (a busy handler would sleep on the event loop's thread) and, when another
process holds it, tried again after 1, 2, 4 ... 50 ms. Each attempt cost a session, a pooled
connection and three statements (~0.3 ms of the loop), and the growing pauses made a process
that met the other's write lock a few times in a row wait tens of milliseconds after it was
free: with `serve`'s two processes saving onboarding records, a save waited 35-50 ms (median)
for a transaction that holds the lock for 1-3 ms.

Now the processes take turns on an advisory lock first: `flock` on a file beside the database.
Asking costs one system call, so a waiting writer asks every 0.25-2 ms and gets its turn at
most ~2 ms after the other process's commit. BEGIN IMMEDIATE then finds the database free;
a writer that does not take turns (an older process, the sqlite3 shell) is still waited for
by `Database.write`'s own retries. The kernel drops the lock of a process that dies.
"""

from __future__ import annotations

import asyncio
import fcntl
import os

FIRST_PAUSE_S = 0.00025
LONGEST_PAUSE_S = 0.002


class WriteTurnTimeout(TimeoutError):
    """Another process kept its turn past the wait."""


class WriteTurn:
    """An exclusive `flock` on `path`, asked for without blocking the event loop.

    One per `Database`: callers in a process are serialised by the database's asyncio lock
    first, so a single open file (one lock owner) serves them all.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self._fd

    def try_take(self) -> bool:
        try:
            fcntl.flock(self._file(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    async def take(self, wait_s: float) -> None:
        """Wait for the turn (WriteTurnTimeout after `wait_s`)."""
        if self.try_take():
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        pause = FIRST_PAUSE_S
        while True:
            await asyncio.sleep(pause)
            if self.try_take():
                return
            if loop.time() >= deadline:
                raise WriteTurnTimeout(f"no turn to write {self.path} in {wait_s:g} s")
            pause = min(pause * 2, LONGEST_PAUSE_S)

    def give_back(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # also drops the lock
            self._fd = None
