"""A second OS process that writes to the same SQLite file (run by test_sqlite_concurrency).

    python -m tests.db.writer <database url> <writes>

Prints "ready" once connected, waits for a line on stdin, then does its writes as fast as
it can and prints "done". Any error (such as "database is locked") ends it with a traceback.
"""

from __future__ import annotations

import asyncio
import sys

from tests.db.counter import counted, increment, open_database


async def main(url: str, writes: int) -> None:
    database = open_database(url)
    try:
        await database.run_read(counted)  # connect (and apply the pragmas) before the start
        print("ready", flush=True)
        sys.stdin.readline()
        await asyncio.gather(*(increment(database, f"process-{i}") for i in range(writes)))
    finally:
        await database.dispose()
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
