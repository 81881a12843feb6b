"""SQLite under concurrent writers: WAL, BEGIN IMMEDIATE and an asynchronous wait for the write
lock mean no writer ever gets "database is locked", within one process (200 asyncio tasks) or
across processes, and a writer waiting for another process never stalls the event loop.

These run on their own SQLite file whichever database the rest of the suite uses, since the
behaviour under test is SQLite's.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from controlcenter.db import Database
from controlcenter.db.sqlite_driver import BUSY_TIMEOUT_MS
from tests.db.counter import create_schema, increment, increment_by_driver

TASKS = 200
PROCESSES = 2
WRITES_PER_PROCESS = 100


@pytest.fixture
async def database(tmp_path: Path) -> Database:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'concurrency.db'}")
    await create_schema(database)
    return database


async def test_wal_and_busy_timeout_on_every_connection(database: Database) -> None:
    try:
        async with database.read() as db:
            assert (await db.execute(text("PRAGMA journal_mode"))).scalar_one() == "wal"
            assert (await db.execute(text("PRAGMA busy_timeout"))).scalar_one() == BUSY_TIMEOUT_MS
            assert (await db.execute(text("PRAGMA foreign_keys"))).scalar_one() == 1
    finally:
        await database.dispose()
    # WAL is a property of the file: any other client sees it too.
    path = database.url.removeprefix("sqlite+aiosqlite:///")
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_200_concurrent_writers_in_one_process(database: Database) -> None:
    try:
        results = await asyncio.gather(
            *(increment(database, f"task-{i}") for i in range(TASKS)), return_exceptions=True
        )
        assert [r for r in results if r is not None] == []
        async with database.read() as db:
            n = (await db.execute(text("SELECT n FROM counter"))).scalar_one()
            count = (await db.execute(text("SELECT count(*) FROM writes"))).scalar_one()
        assert (n, count) == (TASKS, TASKS)  # no lost update either
    finally:
        await database.dispose()


async def test_session_and_statement_writers_together(database: Database) -> None:
    """`write_driver` (the chat's event writer) queues with `write()` and takes the write
    lock up front as well: half of 200 writers of each kind, none refused, none lost."""
    try:
        writers = [
            (increment if i % 2 else increment_by_driver)(database, f"task-{i}")
            for i in range(TASKS)
        ]
        results = await asyncio.gather(*writers, return_exceptions=True)
        assert [r for r in results if r is not None] == []
        async with database.read() as db:
            n = (await db.execute(text("SELECT n FROM counter"))).scalar_one()
            count = (await db.execute(text("SELECT count(*) FROM writes"))).scalar_one()
        assert (n, count) == (TASKS, TASKS)
    finally:
        await database.dispose()


@pytest.mark.parametrize("driver", ["inline", "aiosqlite"])
async def test_a_session_writer_holds_the_write_lock_from_its_start(
    tmp_path: Path, driver: str
) -> None:
    """`write()` begins IMMEDIATE (the inline driver straight on SQLite, aiosqlite through
    SQLAlchemy): before any statement, another connection cannot write, and the session's
    connection has its busy timeout back for what it runs; a plain `read()` takes no lock."""
    path = tmp_path / "lock.db"
    database = Database(f"sqlite+aiosqlite:///{path}", sqlite_driver=driver)
    await create_schema(database)

    def other_writer_refused() -> bool:
        with closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as other:
            try:
                other.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                assert "locked" in str(exc)
                return True
            other.execute("ROLLBACK")
            return False

    try:
        async with database.write() as db:
            assert other_writer_refused()
            assert (await db.execute(text("PRAGMA busy_timeout"))).scalar_one() == BUSY_TIMEOUT_MS
            await db.execute(text("INSERT INTO writes (who) VALUES ('session')"))
        assert not other_writer_refused()  # committed: the lock is free again
        async with database.read() as db:
            assert not other_writer_refused()
            count = (await db.execute(text("SELECT count(*) FROM writes"))).scalar_one()
        assert count == 1
    finally:
        await database.dispose()


async def test_a_driver_writer_rolls_back_on_error(database: Database) -> None:
    try:
        with pytest.raises(RuntimeError):
            async with database.write_driver() as db:
                await db.execute("INSERT INTO writes (who) VALUES ('rolled back')")
                raise RuntimeError("refused")
        async with database.read() as db:
            count = (await db.execute(text("SELECT count(*) FROM writes"))).scalar_one()
        assert count == 0
    finally:
        await database.dispose()


@pytest.mark.timeout(300)
async def test_writers_in_several_processes_at_once(database: Database, repo_root: Path) -> None:
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.db.writer",
            database.url,
            str(WRITES_PER_PROCESS),
            cwd=repo_root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            line = await asyncio.wait_for(process.stdout.readline(), timeout=240)
            assert line == b"ready\n", (await process.communicate())[1].decode()
        for process in processes:  # start them all at once, and this process with them
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            await process.stdin.drain()
        here = await asyncio.gather(
            *(increment(database, f"task-{i}") for i in range(TASKS)), return_exceptions=True
        )
        outputs = [await asyncio.wait_for(p.communicate(), timeout=240) for p in processes]
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
        await database.dispose()
    assert [r for r in here if r is not None] == []
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr.decode()
        assert stdout.endswith(b"done\n")
        assert b"locked" not in stderr
    expected = TASKS + PROCESSES * WRITES_PER_PROCESS
    path = database.url.removeprefix("sqlite+aiosqlite:///")
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT n FROM counter").fetchone() == (expected,)
        assert conn.execute("SELECT count(*) FROM writes").fetchone() == (expected,)
        by_process = conn.execute(
            "SELECT count(*) FROM writes WHERE who LIKE 'process-%'"
        ).fetchone()
        assert by_process == (PROCESSES * WRITES_PER_PROCESS,)


HOLD_S = 1.0
LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE counter SET n = n + 1000 WHERE id = 1")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


@pytest.mark.parametrize("write", [increment, increment_by_driver])
async def test_a_writer_waits_for_another_process_without_stalling_the_loop(
    database: Database, write: Callable[[Database, str], Awaitable[None]]
) -> None:
    path = database.url.removeprefix("sqlite+aiosqlite:///")
    locker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOCKER, path, str(HOLD_S), stdout=subprocess.PIPE
    )
    loop = asyncio.get_running_loop()
    gaps: list[float] = []

    async def tick() -> None:
        last = loop.time()
        while True:
            await asyncio.sleep(0.005)
            now = loop.time()
            gaps.append(now - last)
            last = now

    try:
        assert locker.stdout is not None
        assert await asyncio.wait_for(locker.stdout.readline(), timeout=60) == b"locked\n"
        ticker = asyncio.create_task(tick())
        started = loop.time()
        await write(database, "after-the-lock")
        waited = loop.time() - started
        ticker.cancel()
        assert await locker.wait() == 0
        async with database.read() as db:
            n = (await db.execute(text("SELECT n FROM counter"))).scalar_one()
    finally:
        if locker.returncode is None:
            locker.kill()
            await locker.wait()
        await database.dispose()
    assert n == 1001  # the other process's update and ours, neither lost
    assert waited > HOLD_S / 2  # it did wait for the lock...
    assert max(gaps) < HOLD_S / 4  # ...while the loop went on serving


@pytest.mark.parametrize("write", [increment, increment_by_driver])
async def test_processes_take_turns_before_asking_sqlite(
    tmp_path: Path, write: Callable[[Database, str], Coroutine[Any, Any, None]]
) -> None:
    """A writer waiting for another process's transaction waits for its turn (`write_turn`),
    not by retrying BEGIN IMMEDIATE, and is let in right after the other's commit; a failed
    transaction gives its turn back. Both write paths take turns (`write` and
    `write_driver`). Two `Database`s on one file stand for two processes (each opens the
    turn's file: two lock owners, as two processes are). The second's attempts at BEGIN
    IMMEDIATE are counted where each path makes them (`write_driver`'s connection is held,
    not taken from the pool, and its BEGIN never passes SQLAlchemy's events)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'turns.db'}"
    first, second = Database(url), Database(url)
    await create_schema(first)
    attempts: list[object] = []

    def counted(begin: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[object]]:
        def attempt(*args: object) -> Awaitable[object]:
            attempts.append(args)
            return begin(*args)

        return attempt

    for name in ("_session_immediate", "_driver_immediate"):  # one call per attempt
        setattr(second, name, counted(getattr(second, name)))
    loop = asyncio.get_running_loop()
    holding = asyncio.Event()
    release = asyncio.Event()

    async def hold() -> float:
        async with first.write() as db:
            await db.execute(text("UPDATE counter SET n = n + 1 WHERE id = 1"))
            holding.set()
            await release.wait()
        return loop.time()

    try:
        holder = asyncio.create_task(hold())
        await holding.wait()
        waiter = asyncio.create_task(write(second, "second"))
        await asyncio.sleep(0.3)
        assert not waiter.done() and attempts == []  # waiting for its turn, not asking SQLite
        release.set()
        committed = await holder
        await waiter
        assert loop.time() - committed < 0.1  # let in at once (the backoff was up to 50 ms)
        assert len(attempts) == 1
        with pytest.raises(RuntimeError):
            async with first.write():
                raise RuntimeError("rolled back")
        await asyncio.wait_for(write(second, "after"), 5)  # the turn was given back
    finally:
        await first.dispose()
        await second.dispose()


async def test_the_held_writer_never_sleeps_in_sqlite_and_gives_its_connection_back_as_found(
    database: Database,
) -> None:
    """`write_driver`'s held connection has no busy timeout while held (BEGIN IMMEDIATE fails at
    once and is retried without blocking the loop, the test above), and the pool's timeout
    again once it goes back for others."""
    try:
        async with database.write_driver() as driver:
            cursor = await driver.execute("PRAGMA busy_timeout")
            assert await cursor.fetchone() == (0,)
            await cursor.close()
        await database._held.close()  # what dispose does first
        async with database.read() as db:  # the pool's one connection: the one held before
            assert (await db.execute(text("PRAGMA busy_timeout"))).scalar_one() == BUSY_TIMEOUT_MS
    finally:
        await database.dispose()
