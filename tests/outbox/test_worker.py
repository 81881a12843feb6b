"""The worker's machinery with plain handlers: outcomes, retries, death, leases, claims, stop."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import event
from structlog.testing import capture_logs

from controlcenter.db import Database, utcnow
from controlcenter.outbox.errors import DeliveryError, MissingSettings
from controlcenter.outbox.models import DEAD, DONE, PENDING, OutboxJob
from controlcenter.outbox.worker import ClaimedJob, Handler, OutboxWorker
from tests.conftest import RunningServer
from tests.dbtools import writing
from tests.outbox.conftest import add_job, all_jobs, fast_config, get_job, wait_for

KIND = "test.kind"


async def test_a_delivered_job_is_done(server: RunningServer) -> None:
    seen: list[dict[str, object]] = []

    async def handler(job: ClaimedJob) -> None:
        seen.append(job.payload)

    job_id = await add_job(server.db, KIND, {"userId": "u1"})
    worker = OutboxWorker(server.db, fast_config(server.config), {KIND: handler})
    assert await worker.run_once() == 1
    assert seen == [{"userId": "u1"}]
    job = await get_job(server.db, job_id)
    assert (job.status, job.attempts, job.last_error, job.locked_until) == (DONE, 1, None, None)
    assert job.delivered_at is not None
    assert await worker.run_once() == 0  # done jobs are never taken again


async def test_a_failure_is_recorded_and_retried_after_a_jittered_backoff(
    server: RunningServer,
) -> None:
    async def handler(job: ClaimedJob) -> None:
        raise DeliveryError("CRM error 503: down", status=503)

    config = fast_config(server.config, outbox_base_backoff_s=10.0)
    job_id = await add_job(server.db, KIND, {})
    before = utcnow()
    await OutboxWorker(server.db, config, {KIND: handler}).run_once()
    job = await get_job(server.db, job_id)
    assert (job.status, job.attempts, job.last_error) == (PENDING, 1, "CRM error 503: down")
    assert job.locked_until is None
    # First retry: somewhere in [0, base] seconds from now.
    assert before <= job.next_attempt_at <= utcnow() + timedelta(seconds=10)


async def test_jobs_are_delivered_once_the_crm_is_back(server: RunningServer) -> None:
    calls: Counter[str] = Counter()

    async def handler(job: ClaimedJob) -> None:
        calls[job.id] += 1
        if calls[job.id] <= 3:
            raise DeliveryError("CRM unreachable (could not connect)")

    ids = [await add_job(server.db, KIND, {"n": n}) for n in range(3)]
    worker = OutboxWorker(server.db, fast_config(server.config), {KIND: handler})
    task = asyncio.create_task(worker.run())

    async def all_done() -> bool:
        return all(job.status == DONE for job in await all_jobs(server.db))

    await wait_for(all_done)
    await worker.stop()
    await task
    assert calls == dict.fromkeys(ids, 4)
    for job_id in ids:
        job = await get_job(server.db, job_id)
        assert job.attempts == 4 and job.last_error is None


async def test_a_job_dies_after_its_maximum_age_and_keeps_its_error(
    server: RunningServer,
) -> None:
    calls = 0

    async def handler(job: ClaimedJob) -> None:
        nonlocal calls
        calls += 1
        raise DeliveryError(f"CRM error 500: failure {calls}", status=500)

    config = fast_config(server.config, outbox_max_age_s=0.3)
    job_id = await add_job(server.db, KIND, {})
    worker = OutboxWorker(server.db, config, {KIND: handler})
    task = asyncio.create_task(worker.run())

    async def dead() -> bool:
        return (await get_job(server.db, job_id)).status == DEAD

    await wait_for(dead)
    await worker.stop()
    await task
    job = await get_job(server.db, job_id)
    assert calls > 1  # retried while young
    assert job.attempts == calls
    assert job.last_error == f"CRM error 500: failure {calls}"
    assert job.locked_until is None and job.delivered_at is None
    assert await worker.run_once() == 0  # dead jobs stay dead, kept for inspection


async def test_a_rejected_request_is_retried_too(server: RunningServer) -> None:
    async def handler(job: ClaimedJob) -> None:
        raise DeliveryError("CRM error 401: Invalid JWT", retryable=False, status=401)

    job_id = await add_job(server.db, KIND, {})
    await OutboxWorker(server.db, fast_config(server.config), {KIND: handler}).run_once()
    job = await get_job(server.db, job_id)
    assert (job.status, job.attempts, job.last_error) == (PENDING, 1, "CRM error 401: Invalid JWT")


async def test_missing_settings_leave_the_job_pending_without_an_attempt(
    server: RunningServer,
) -> None:
    async def handler(job: ClaimedJob) -> None:
        raise MissingSettings(["crmOwnerLocationId", "crmPrivateToken"])

    config = fast_config(server.config, outbox_max_age_s=1.0)
    job_id = await add_job(server.db, KIND, {}, age_s=3600)  # far past the maximum age
    worker = OutboxWorker(server.db, config, {KIND: handler})
    with capture_logs() as logs:
        await worker.run_once()
    job = await get_job(server.db, job_id)
    assert (job.status, job.attempts) == (PENDING, 0)
    assert job.last_error == "missing settings: crmOwnerLocationId, crmPrivateToken"
    assert job.next_attempt_at > utcnow() - timedelta(seconds=1)
    waiting = [entry for entry in logs if entry["event"] == "outbox job waits for settings"]
    assert waiting and waiting[0]["missing"] == ["crmOwnerLocationId", "crmPrivateToken"]
    assert waiting[0]["log_level"] == "warning"
    await asyncio.sleep(config.outbox_settings_recheck_s)
    assert await worker.run_once() == 1  # re-checked later, still not dead
    assert (await get_job(server.db, job_id)).status == PENDING


async def test_an_unknown_kind_is_dead_at_once(server: RunningServer) -> None:
    job_id = await add_job(server.db, "nobody.handles.this", {})
    await OutboxWorker(server.db, fast_config(server.config), {}).run_once()
    job = await get_job(server.db, job_id)
    assert (job.status, job.last_error) == (DEAD, "unknown job kind 'nobody.handles.this'")


async def test_a_crashing_handler_is_retried_with_its_error(server: RunningServer) -> None:
    async def handler(job: ClaimedJob) -> None:
        raise RuntimeError("boom")

    job_id = await add_job(server.db, KIND, {})
    await OutboxWorker(server.db, fast_config(server.config), {KIND: handler}).run_once()
    job = await get_job(server.db, job_id)
    assert (job.status, job.attempts, job.last_error) == (PENDING, 1, "RuntimeError: boom")


async def test_a_delivery_longer_than_its_timeout_times_out(server: RunningServer) -> None:
    async def handler(job: ClaimedJob) -> None:
        await asyncio.sleep(5)

    job_id = await add_job(server.db, KIND, {})
    config = fast_config(server.config, outbox_delivery_timeout_s=0.2)
    await OutboxWorker(server.db, config, {KIND: handler}).run_once()
    job = await get_job(server.db, job_id)
    assert (job.status, job.attempts, job.last_error) == (PENDING, 1, "delivery timed out")


async def test_a_leased_job_is_skipped_until_the_lease_expires(server: RunningServer) -> None:
    delivered: list[str] = []

    async def handler(job: ClaimedJob) -> None:
        delivered.append(job.id)

    held = await add_job(server.db, KIND, {}, locked_until=utcnow() + timedelta(seconds=60))
    expired = await add_job(server.db, KIND, {}, locked_until=utcnow() - timedelta(seconds=1))
    later = await add_job(server.db, KIND, {})
    async with writing(server.db) as db:  # not due yet
        job = await db.get(OutboxJob, later)
        assert job is not None
        job.next_attempt_at = utcnow() + timedelta(seconds=60)
    worker = OutboxWorker(server.db, fast_config(server.config), {KIND: handler})
    assert await worker.run_once() == 1
    assert delivered == [expired]
    assert (await get_job(server.db, held)).status == PENDING


async def test_an_outcome_is_not_saved_over_a_lease_another_worker_took(
    server: RunningServer,
) -> None:
    job_id = await add_job(server.db, KIND, {})
    config = fast_config(server.config)

    async def steal(job: ClaimedJob) -> None:
        # Simulates the lease running out and a second worker reclaiming the job.
        async with writing(server.db) as db:
            row = await db.get(OutboxJob, job_id)
            assert row is not None
            row.locked_until = utcnow() + timedelta(seconds=60)

    worker = OutboxWorker(server.db, config, {KIND: steal})
    assert await worker.run_once() == 1
    job = await get_job(server.db, job_id)
    assert job.status == PENDING and job.attempts == 0  # the reclaimer's lease stands
    assert job.locked_until is not None and job.locked_until > utcnow()


async def test_racing_workers_deliver_every_job_exactly_once(server: RunningServer) -> None:
    calls: Counter[str] = Counter()
    by_worker: Counter[str] = Counter()
    config = fast_config(server.config, outbox_concurrency=3)

    def handler_for(name: str) -> Handler:
        async def handler(job: ClaimedJob) -> None:
            calls[job.id] += 1
            by_worker[name] += 1
            await asyncio.sleep(0.005)

        return handler

    ids = [await add_job(server.db, KIND, {"n": n}) for n in range(60)]
    # Each worker has its own engine, as separate processes would.
    databases = [Database(server.db.url) for _ in range(3)]
    workers = [
        OutboxWorker(db, config, {KIND: handler_for(f"w{i}")}, name=f"w{i}")
        for i, db in enumerate(databases)
    ]
    tasks = [asyncio.create_task(worker.run()) for worker in workers]

    async def all_done() -> bool:
        return all(job.status == DONE for job in await all_jobs(server.db))

    try:
        await wait_for(all_done, within=30)
    finally:
        for worker in workers:
            await worker.stop()
        await asyncio.gather(*tasks)
        for db in databases:
            await db.dispose()
    assert calls == dict.fromkeys(ids, 1)
    assert sum(by_worker.values()) == 60
    assert len(by_worker) >= 2  # they really raced


async def test_stop_lets_a_delivery_in_flight_finish(server: RunningServer) -> None:
    started = asyncio.Event()

    async def handler(job: ClaimedJob) -> None:
        started.set()
        await asyncio.sleep(0.3)

    job_id = await add_job(server.db, KIND, {})
    worker = OutboxWorker(server.db, fast_config(server.config), {KIND: handler})
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 5)
    await worker.stop()
    await asyncio.wait_for(task, 5)
    assert (await get_job(server.db, job_id)).status == DONE


async def test_stop_releases_a_delivery_that_outlasts_the_grace(server: RunningServer) -> None:
    started = asyncio.Event()

    async def handler(job: ClaimedJob) -> None:
        started.set()
        await asyncio.sleep(30)

    job_id = await add_job(server.db, KIND, {})
    config = fast_config(server.config, outbox_shutdown_grace_s=0.1)
    worker = OutboxWorker(server.db, config, {KIND: handler})
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 5)
    await worker.stop()
    await asyncio.wait_for(task, 5)
    job = await get_job(server.db, job_id)
    # Given back at once: another worker may take it without waiting for the lease.
    assert (job.status, job.attempts, job.locked_until) == (PENDING, 0, None)


async def test_a_claim_is_one_read_and_one_update_whatever_it_takes(
    server: RunningServer,
) -> None:
    """On SQLite the claim holds the database's one write lock: one statement per job (the
    ORM's flush) held it for 5-25 ms with 64 jobs, while every request that writes waited."""
    ids = [await add_job(server.db, KIND, {"n": n}) for n in range(12)]
    later = await add_job(server.db, KIND, {}, age_s=-3600)  # due in an hour
    statements: list[tuple[str, bool]] = []

    def seen(
        conn: object, cursor: object, statement: str, params: object, context: object, many: bool
    ) -> None:
        statements.append((statement.split(None, 1)[0].upper(), many))

    engine = server.db.write_engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        claimed = await OutboxWorker(server.db, fast_config(server.config), {}).claim(10)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    # One UPDATE for them all, not one per job (an executemany is one per job).
    verbs = [s for s in statements if s[0] in {"SELECT", "UPDATE"}]
    assert verbs == [("SELECT", False), ("UPDATE", False)]
    assert len(claimed) == 10 and {job.id for job in claimed} < set(ids)
    assert len({job.lease for job in claimed}) == 1
    for job in claimed:
        row = await get_job(server.db, job.id)
        assert row.locked_until == job.lease and row.payload == job.payload
    unclaimed = [await get_job(server.db, i) for i in [*set(ids) - {j.id for j in claimed}]]
    assert [row.locked_until for row in unclaimed] == [None, None]
    assert (await get_job(server.db, later)).locked_until is None  # not due


class _CountingWrites:
    """A worker's database that counts its write transactions, by the function run."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.writes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    async def run_write(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.writes.append(work.__name__)
        return await self.db.run_write(work, *args, **kwargs)


async def test_an_idle_worker_claims_only_once_a_read_finds_a_job_due(
    server: RunningServer,
) -> None:
    """A claim is a write transaction (on SQLite the database's one write lock): after one
    that found nothing, the polls read whether a job is due, and claim only then."""
    delivered: list[str] = []

    async def handler(job: ClaimedJob) -> None:
        delivered.append(job.id)

    counting = _CountingWrites(server.db)
    config = fast_config(server.config)
    worker = OutboxWorker(cast(Database, counting), config, {KIND: handler})
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(config.outbox_poll_interval_s * 10)
    assert counting.writes == ["_claim"]  # the first poll's, then reads only
    later = await add_job(server.db, KIND, {}, age_s=-3600)  # due in an hour: still idle
    await asyncio.sleep(config.outbox_poll_interval_s * 5)
    assert counting.writes == ["_claim"]
    job_id = await add_job(server.db, KIND, {})

    async def delivered_once() -> bool:
        return delivered == [job_id]

    await wait_for(delivered_once)
    await worker.stop()
    await task
    assert counting.writes[:2] == ["_claim", "_claim"]
    assert (await get_job(server.db, job_id)).status == DONE
    assert (await get_job(server.db, later)).locked_until is None
