"""SQLite's writers in several processes take turns through the kernel, not SQLite's busy handler.

SQLite lets one connection write at a time. A writer that finds the database locked by another
process waits in SQLite's busy handler, which polls: it sleeps 1, 2, 5, 10, 15, 20, 25 ms and
then up to 100 ms between tries. A process runs its writes one after another, so while it has
writes queued it takes the lock again the moment it commits, and another process's writer,
asleep in its handler, misses it again and again. Every writer of the service (each process's
`Database`, and the liveness heartbeat's own) therefore takes an exclusive `flock` on a file
beside the database before it begins a transaction, and drops it after the commit: a writer
waiting in `flock` is woken by the kernel as soon as the lock is dropped, and usually takes the
next turn (the kernel hands the lock to nobody: the process that dropped it may take it again
first). The kernel drops the lock of a process that ends, however it ends. The wait for a turn
has no time limit: a turn lasts one write transaction, whose own waits are SQLite's.

SQLite's own lock still guards the data: a connection that takes no turn (a migration,
`controlcenter db restore`, another program) meets the service's writers in the busy handler.
The turns are an aid to fairness, not to correctness: when the file cannot be opened (another
user made it, with a mode that shuts this one out), the process says so once and writes
without turns.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from controlcenter.common.logs import get_logger

log = get_logger(__name__)

SUFFIX = ".write-turn"  # the turns' file: the database file's own path with this after it


class WriteTurns:
    """The turns of the writers of the SQLite file `database`, one process at a time. Used by
    one thread (the writer's), then closed once that thread is done."""

    def __init__(self, database: str) -> None:
        # Its own file: a descriptor of the database file itself, once closed, would drop the
        # locks SQLite holds on it (POSIX locks belong to the process, not the descriptor).
        # Beside the file SQLite opens (a link resolved), so every name of it shares the turns.
        self.database = Path(database).resolve()
        self.path = self.database.with_name(self.database.name + SUFFIX)
        self._fd: int | None = None
        self._unusable = False

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Held while the block runs; waits for another process's writer to finish first."""
        fd = self._open()
        if fd is None:
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _open(self) -> int | None:
        # Opened at the first write, with the database file's mode (SQLite's own 0644 for a
        # file it is about to create), so that whoever may write the database may take
        # turns. Read-only is enough for `flock`.
        if self._fd is None and not self._unusable:
            try:
                mode = self.database.stat().st_mode & 0o666 if self.database.exists() else 0o644
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, mode)
            except OSError as exc:
                self._unusable = True
                log.warning(
                    "sqlite writes take no turns: the turns' file cannot be opened",
                    path=str(self.path),
                    error=type(exc).__name__,
                )
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
