"""A delivery keeps its job's lease while it works.

The lease is short (`outbox_lease_s`, 20 s by default) so that a job whose process died is
taken again soon, and renewed every quarter lease while the delivery runs, so that a slow CRM
call never lets a second worker take a job that is still being delivered. A renewal that finds
the lease gone (another worker took the job after this process stalled past the lease), or that
cannot reach the database before the lease ends, stops the delivery: the job is the other
worker's now, or will be.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import bindparam, update

from controlcenter.common.logs import get_logger
from controlcenter.db import Database, utcnow
from controlcenter.outbox.models import PENDING, OutboxJob

log = get_logger(__name__)

# Built once (bound parameters): every delivery in flight runs it every quarter lease.
_RENEW = (
    update(OutboxJob)
    .where(
        OutboxJob.id == bindparam("b_id"),
        OutboxJob.status == PENDING,
        OutboxJob.locked_until == bindparam("b_lease"),
    )
    .values(locked_until=bindparam("b_new_lease"))
)


class Leased(Protocol):
    id: str
    lease: datetime  # the job's `locked_until` as this worker last set it


class LeaseLostError(Exception):
    """The delivery was stopped: the job's lease is no longer this worker's."""


@asynccontextmanager
async def kept_lease(db: Database, job: Leased, lease_s: float) -> AsyncIterator[None]:
    """Renew `job.lease` while the block runs; raise LeaseLostError if it is lost meanwhile."""
    task = asyncio.current_task()
    assert task is not None
    lost, done = asyncio.Event(), asyncio.Event()
    renewer = asyncio.create_task(
        _renew(db, job, lease_s, task, lost, done), name=f"lease-{job.id}"
    )
    cancelling = task.cancelling()
    try:
        yield
    except asyncio.CancelledError:
        if lost.is_set() and task.uncancel() <= cancelling:
            raise LeaseLostError(job.id) from None
        raise
    finally:
        # Stopped between renewals, never inside one: a renewal cancelled after its commit
        # would leave `job.lease` behind the row, and the outcome (written where
        # `locked_until` is our lease) would find the lease lost.
        done.set()
        await asyncio.gather(renewer, return_exceptions=True)


async def _renew(
    db: Database,
    job: Leased,
    lease_s: float,
    owner: asyncio.Task[object],
    lost: asyncio.Event,
    done: asyncio.Event,
) -> None:
    while True:
        try:
            await asyncio.wait_for(done.wait(), lease_s / 4)
        except TimeoutError:
            pass
        else:
            return
        new_lease = utcnow() + timedelta(seconds=lease_s)
        try:
            async with db.write() as session:
                connection = await session.connection()
                parameters = {"b_id": job.id, "b_lease": job.lease, "b_new_lease": new_lease}
                renewed = (await connection.execute(_RENEW, parameters)).rowcount
        except Exception:
            log.exception("outbox could not renew a lease; trying again", job_id=job.id)
            if utcnow() < job.lease:
                continue
        else:
            if renewed == 1:
                job.lease = new_lease
                continue
        log.warning("outbox lease lost during delivery; leaving the job to others", job_id=job.id)
        lost.set()
        owner.cancel()
        return
