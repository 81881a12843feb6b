"""SQLite's WAL checkpoints, on a thread of the process instead of inside a request's commit.

By default SQLite checkpoints in the commit that takes the write-ahead log past 1,000 pages:
that commit also copies the log's pages into the database file and syncs it. The service's
connections run on the event loop's thread (`sqlite_driver.InlineConnection`), so every few
hundred saves one commit held the loop, and every request of the process with it, for the
copy and the sync (the onboarding POSTs' slowest answers in `make bench` came in groups of a
process's whole batch; BENCHMARKS.md). The service's connections now never checkpoint
(`PRAGMA wal_autocheckpoint=0`, set on each as it opens) and this thread does: a PASSIVE
checkpoint every `INTERVAL_S`, which never waits for a reader or a writer and is never waited
for (a writer appends to the log meanwhile; the log restarts from its beginning once a
checkpoint has copied all of it). Each process runs one; two asking at once, one gets SQLite's
checkpoint lock and the other returns at once. A checkpoint that fails (the database
unreachable, its file gone) is logged once and tried again at each interval. Only the
service's `Database` runs one (`app.build_services`): a command's connections checkpoint as
SQLite's defaults do, and the last connection to close a database checkpoints whatever is
left.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from controlcenter.common.logs import get_logger

log = get_logger(__name__)

INTERVAL_S = 0.5
OFF = "PRAGMA wal_autocheckpoint=0"  # set on the connections whose commits must not checkpoint


class Checkpoints:
    """A thread that checkpoints the SQLite database at `path` every `interval_s`."""

    def __init__(self, path: str, interval_s: float = INTERVAL_S) -> None:
        self._uri = Path(path).absolute().as_uri()
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.done = 0  # checkpoints that ran (an idle log's too)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="sqlite-checkpoints", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            failing = False
            while not self._stop.wait(self._interval_s):
                try:
                    if connection is None:
                        # Read-write, never created: a missing database is the service's to
                        # report, not this thread's to make.
                        connection = sqlite3.connect(
                            f"{self._uri}?mode=rw", uri=True, isolation_level=None
                        )
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:
                    if not failing:  # once per run of failures, not every interval
                        log.warning("sqlite checkpoint failed", error=str(exc))
                    failing = True
                    continue
                failing = False
                self.done += 1
        finally:
            if connection is not None:
                connection.close()
