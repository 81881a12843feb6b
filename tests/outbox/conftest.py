"""Helpers for the outbox tests: write jobs as the onboarding transaction does, read them back."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy import select

from controlcenter.admin_settings.store import SettingsStore
from controlcenter.app import open_database, worker_handlers
from controlcenter.config import Config
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database, utcnow
from controlcenter.outbox.models import DONE, OutboxJob
from controlcenter.outbox.worker import OutboxWorker
from tests.dbtools import reading, writing

# Small numbers so retries and leases play out in well under a second.
FAST = {
    "outbox_poll_interval_s": 0.02,
    "outbox_base_backoff_s": 0.02,
    "outbox_max_backoff_s": 0.1,
    "outbox_settings_recheck_s": 0.05,
    "outbox_shutdown_grace_s": 2.0,
}


def fast_config(config: Config, **overrides: Any) -> Config:
    return config.model_copy(update={**FAST, **overrides})


async def add_job(
    db: Database, kind: str, payload: dict[str, Any], *, age_s: float = 0.0, **fields: Any
) -> str:
    created = utcnow() - timedelta(seconds=age_s)
    job = OutboxJob(
        kind=kind, payload=payload, created_at=created, next_attempt_at=created, **fields
    )
    async with writing(db) as session:
        session.add(job)
    return job.id


async def get_job(db: Database, job_id: str) -> OutboxJob:
    async with reading(db) as session:
        job = await session.get(OutboxJob, job_id)
    assert job is not None
    return job


async def all_jobs(db: Database) -> list[OutboxJob]:
    async with reading(db) as session:
        return list((await session.scalars(select(OutboxJob))).all())


async def wait_for(condition: Callable[[], Awaitable[bool] | bool], within: float = 10.0) -> None:
    """Poll `condition` (sync or async) until true; fail the test after `within` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def job_status(db: Database, job_id: str) -> str:
    return (await get_job(db, job_id)).status


async def job_delivered(db: Database, job_id: str) -> bool:
    return await job_status(db, job_id) == DONE


async def job_tried(db: Database, job_id: str) -> bool:
    """Whether the job has been tried and not delivered (it waits, or failed)."""
    return (await get_job(db, job_id)).last_error is not None


@asynccontextmanager
async def running(worker: OutboxWorker) -> AsyncIterator[None]:
    """`worker` runs for the block, then stops (its deliveries in flight finished)."""
    task = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        await worker.stop()
        await task


@asynccontextmanager
async def separate_workers(config: Config, count: int) -> AsyncIterator[list[OutboxWorker]]:
    """`count` workers, each with its own database engine and CRM client pool, as separate
    processes have them; closed at the end."""
    databases = [open_database(config) for _ in range(count)]
    crms = [CrmTransport.from_config(config) for _ in range(count)]
    try:
        yield [
            OutboxWorker(
                db,
                config,
                worker_handlers(config, db, SettingsStore(db, config.fernet_key), crm),
                name=f"w{i}",
            )
            for i, (db, crm) in enumerate(zip(databases, crms, strict=True))
        ]
    finally:
        for crm in crms:
            await crm.aclose()
        for db in databases:
            await db.dispose()


async def run_until_all_done(db: Database, workers: list[OutboxWorker], within: float) -> None:
    """Run the workers until every job is done, then stop them."""
    tasks = [asyncio.create_task(worker.run()) for worker in workers]
    try:

        async def all_done() -> bool:
            return all(job.status == DONE for job in await all_jobs(db))

        await wait_for(all_done, within=within)
    finally:
        for worker in workers:
            await worker.stop()
        await asyncio.gather(*tasks)
