"""SQLite's writers in several processes take turns through the kernel, not SQLite's busy handler.

SQLite lets one connection write at a time. A writer that finds the database locked by another
process waits in SQLite's busy handler, which polls: it sleeps 1, 2, 5, 10, 15, 20, 25 ms and
then up to 100 ms between tries. Each process runs its writes one after another on one thread,
so while one process has writes queued it takes the lock again the moment it commits, and
another process's writer, asleep in its handler, misses it again and again. With the service's
two workers saving onboarding records at once, a save's p99 was 330-1,200 ms. Every process's
writer therefore takes an exclusive `flock` on a file beside the database before it begins a
transaction, and drops it after the commit: a writer waiting in `flock` is woken by the kernel
as soon as the lock is dropped, so the processes' writes interleave (p99 130-160 ms on the same
load). The kernel drops the lock of a process that ends, however it ends.

SQLite's own lock still guards the data: a connection that takes no turn (a migration, a
command-line tool) meets the service's writers in the busy handler, as before.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SUFFIX = ".write-turn"  # the turns' file: the database's own name with this after it


class WriteTurns:
    """The turns of the writers of the SQLite file `database`, one process at a time."""

    def __init__(self, database: str) -> None:
        # Its own file: a descriptor of the database file itself, once closed, would drop the
        # locks SQLite holds on it (POSIX locks belong to the process, not the descriptor).
        self.path = Path(database).resolve().with_name(Path(database).name + SUFFIX)
        self._fd: int | None = None
        self._opening = threading.Lock()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Held while the block runs; waits for another process's writer to finish first."""
        fd = self._open()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _open(self) -> int:
        # Opened at the first write, by when SQLite has the database's folder (or has failed).
        with self._opening:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            return self._fd

    def close(self) -> None:
        with self._opening:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
