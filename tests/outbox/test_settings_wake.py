"""A change of the settings, made by any process, makes the waiting jobs due at once: a job
waiting for its settings, or failing for want of a fixed one, goes as soon as an administrator
saves them, not after its recheck or its backoff (both an hour here). On SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio

from sqlalchemy.orm import Session
from structlog.testing import capture_logs

from controlcenter.admin_settings.store import SETTINGS
from controlcenter.app import WORKER_WAKES, open_database
from controlcenter.db import Database
from controlcenter.db.changes import mark_changed
from controlcenter.outbox.errors import DeliveryError, MissingSettings
from controlcenter.outbox.models import DONE, PENDING
from controlcenter.outbox.worker import ClaimedJob, Handler, OutboxWorker
from tests.conftest import RunningServer
from tests.dbtools import committed_writes, failing_write
from tests.outbox.conftest import (
    add_job,
    fast_config,
    get_job,
    job_delivered,
    job_tried,
    running,
    wait_for,
)

KIND = "test.kind"
HOUR = 3600.0


class Settings:
    """What the handlers read: usable once `saved`."""

    def __init__(self) -> None:
        self.saved = False


def _changed(session: Session) -> None:
    mark_changed(session, SETTINGS)


async def save(db: Database, settings: Settings) -> None:
    """An administrator's save, as the settings store marks it."""
    settings.saved = True
    await db.run_write(_changed)


def _made_due(statement: str) -> bool:
    """Whether `statement` is the worker's UPDATE that makes the waiting jobs due (an outcome's
    UPDATE sets the lease too)."""
    head = statement.split("WHERE")[0]
    return head.startswith("UPDATE outbox_jobs SET next_attempt_at") and "locked_until" not in head


async def _status(db: Database, job_id: str) -> tuple[str, int]:
    job = await get_job(db, job_id)
    return job.status, job.attempts


def waiting_for(settings: Settings) -> Handler:
    """A delivery that waits for its settings until they are saved."""

    async def handler(job: ClaimedJob) -> None:
        if not settings.saved:
            raise MissingSettings(["crmPrivateToken"])

    return handler


async def test_the_settings_saved_wake_the_waiting_and_the_failing_jobs(
    server: RunningServer,
) -> None:
    settings = Settings()
    calls: list[str] = []

    async def handler(job: ClaimedJob) -> None:
        calls.append(job.payload["why"])
        if settings.saved:
            return
        if job.payload["why"] == "missing":
            raise MissingSettings(["crmPrivateToken"])
        raise DeliveryError("CRM error 401: Invalid JWT", retryable=False, status=401)

    config = fast_config(
        server.config,
        outbox_settings_recheck_s=HOUR,
        outbox_base_backoff_s=HOUR,
        outbox_max_backoff_s=HOUR,
    )
    waiting = await add_job(server.db, KIND, {"why": "missing"})
    failing = await add_job(server.db, KIND, {"why": "rejected"})
    worker = OutboxWorker(server.db, config, {KIND: handler}, wake_on=WORKER_WAKES)
    async with running(worker):
        await wait_for(lambda: len(calls) == 2)
        assert await _status(server.db, waiting) == (PENDING, 0)
        assert await _status(server.db, failing) == (PENDING, 1)
        await save(server.db, settings)

        async def delivered() -> bool:
            return [await _status(server.db, j) for j in (waiting, failing)] == [
                (DONE, 1),
                (DONE, 2),
            ]

        await wait_for(delivered)
    assert sorted(calls) == ["missing", "missing", "rejected", "rejected"]


async def test_a_save_while_the_job_runs_lets_it_go_at_once(server: RunningServer) -> None:
    """It read the settings before they were saved, and fails for want of them after the
    worker made the waiting jobs due (it was not one of them: it was being delivered)."""
    settings = Settings()
    read, fail = asyncio.Event(), asyncio.Event()

    async def handler(job: ClaimedJob) -> None:
        saved = settings.saved
        read.set()
        await fail.wait()
        if not saved:
            raise MissingSettings(["crmPrivateToken"])

    config = fast_config(server.config, outbox_settings_recheck_s=HOUR)
    job_id = await add_job(server.db, KIND, {})
    worker = OutboxWorker(server.db, config, {KIND: handler}, wake_on=WORKER_WAKES)
    async with running(worker):
        await read.wait()
        with committed_writes(server.db) as writes:
            await save(server.db, settings)
            await wait_for(lambda: any(_made_due(s) for write in writes for s in write))
        fail.set()
        await wait_for(lambda: job_delivered(server.db, job_id))


async def test_a_wake_the_database_refuses_loses_nothing(server: RunningServer) -> None:
    """The UPDATE that makes the waiting jobs due fails: the worker says so and goes on, the
    job keeps its time, and the next save makes it due."""
    settings = Settings()

    config = fast_config(server.config, outbox_settings_recheck_s=HOUR)
    job_id = await add_job(server.db, KIND, {})
    worker = OutboxWorker(server.db, config, {KIND: waiting_for(settings)}, wake_on=WORKER_WAKES)
    # Only that UPDATE moves a job without a lease to an earlier time.
    made_due = "OLD.locked_until IS NULL AND NEW.next_attempt_at < OLD.next_attempt_at"
    async with running(worker):
        await wait_for(lambda: job_tried(server.db, job_id))
        before = await get_job(server.db, job_id)
        with capture_logs() as logs:
            async with failing_write(server.db, "outbox_jobs", made_due, on="UPDATE"):
                await save(server.db, settings)
                await wait_for(
                    lambda: any(
                        entry["event"] == "outbox could not make the waiting jobs due"
                        for entry in logs
                    )
                )
        after = await get_job(server.db, job_id)
        assert (after.status, after.next_attempt_at) == (PENDING, before.next_attempt_at)
        await save(server.db, settings)
        await wait_for(lambda: job_delivered(server.db, job_id))


async def test_a_save_through_another_process_wakes_this_ones_worker(
    server: RunningServer,
) -> None:
    settings = Settings()

    config = fast_config(server.config, outbox_settings_recheck_s=HOUR)
    job_id = await add_job(server.db, KIND, {})
    other = open_database(config)  # its own engine and watch of the stamps, as a process's
    await other.changes.start()
    try:
        worker = OutboxWorker(other, config, {KIND: waiting_for(settings)}, wake_on=WORKER_WAKES)
        async with running(worker):
            await wait_for(lambda: job_tried(server.db, job_id))
            await save(server.db, settings)
            await wait_for(lambda: job_delivered(server.db, job_id))
    finally:
        await other.dispose()


async def test_a_kind_waiting_for_settings_is_not_claimed_until_they_are_saved(
    server: RunningServer,
) -> None:
    """Its later jobs would each wait in turn: they are left alone (another kind's go), and
    go once the settings are saved."""
    settings = Settings()
    calls: list[str] = []

    async def needs_settings(job: ClaimedJob) -> None:
        calls.append(job.id)
        if not settings.saved:
            raise MissingSettings(["crmPrivateToken"])

    async def other(job: ClaimedJob) -> None:
        calls.append(job.id)

    config = fast_config(server.config, outbox_settings_recheck_s=HOUR)
    handlers = {KIND: needs_settings, "test.other": other}
    worker = OutboxWorker(server.db, config, handlers, wake_on=WORKER_WAKES)
    first = await add_job(server.db, KIND, {})
    async with running(worker):
        await wait_for(lambda: calls == [first])
        later = [await add_job(server.db, KIND, {}) for _ in range(3)]
        another = await add_job(server.db, "test.other", {})
        await wait_for(lambda: another in calls)
        for _ in range(10):  # claims that would have taken them
            await asyncio.sleep(config.outbox_poll_interval_s)
        assert calls == [first, another]
        assert [await _status(server.db, j) for j in later] == [(PENDING, 0)] * 3
        await save(server.db, settings)

        async def all_done() -> bool:
            return [await _status(server.db, j) for j in [first, *later]] == [(DONE, 1)] * 4

        await wait_for(all_done)
    assert sorted(calls) == sorted([first, another, first, *later])
