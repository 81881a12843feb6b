"""A worker's deliveries keep their jobs' leases while they work.

The lease is short (`outbox_lease_s`, 20 s by default) so that a job whose process died is
taken again soon, and renewed every quarter lease while the delivery runs, so that a slow CRM
call never lets a second worker take a job that is still being delivered. The leases of all a
worker's deliveries in flight are renewed together, in one short write transaction per quarter
lease (one statement run for every job), not one transaction per job: on SQLite every write
transaction waits for the database's one write lock, beside the requests' own writes. A job
that starts between two renewals is renewed at the next, well within its lease. A renewal
that finds a job's lease gone (another worker took the job after this process stalled past
the lease), or that cannot reach the database before the job's lease ends, stops that job's
delivery: the job is the other worker's now, or will be.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from controlcenter.common.logs import get_logger
from controlcenter.db import Database, utcnow
from controlcenter.outbox.models import PENDING, OutboxJob

log = get_logger(__name__)

# Built once (bound parameters), run for every delivery in flight at each renewal.
_RENEW = (
    update(OutboxJob)
    .where(
        OutboxJob.id == bindparam("b_id"),
        OutboxJob.status == PENDING,
        OutboxJob.locked_until == bindparam("b_lease"),
    )
    .values(locked_until=bindparam("b_new_lease"))
)
# Which of a renewal's jobs it renewed, read when the count of rows it updated is not all of
# them, or unknown (asyncpg counts no rows for a statement run many times).
_RENEWED = select(OutboxJob.id).where(
    OutboxJob.id.in_(bindparam("b_ids", expanding=True)),
    OutboxJob.status == PENDING,
    OutboxJob.locked_until == bindparam("b_new_lease"),
)


class Leased(Protocol):
    id: str
    lease: datetime  # the job's `locked_until` as this worker last set it


class LeaseLostError(Exception):
    """The delivery was stopped: the job's lease is no longer this worker's."""


@dataclass
class _Held:
    job: Leased
    owner: asyncio.Task[object]
    lost: bool = False


@dataclass
class Leases:
    """The leases of one worker's deliveries in flight, renewed together."""

    db: Database
    lease_s: float
    _held: dict[str, _Held] = field(default_factory=dict)
    # Held during a renewal: a delivery that ends waits for the renewal under way, never
    # cancels it halfway (a renewal cancelled after its commit would leave `job.lease` behind
    # the row, and the outcome, written where `locked_until` is our lease, would find the lease
    # lost).
    _renewing: asyncio.Lock = field(default_factory=asyncio.Lock)
    _emptied: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def kept(self, job: Leased) -> AsyncIterator[None]:
        """Renew `job.lease` while the block runs; raise LeaseLostError if it is lost
        meanwhile."""
        owner = asyncio.current_task()
        assert owner is not None
        held = self._held[job.id] = _Held(job, owner)
        self._emptied.clear()
        if self._task is None:
            self._task = asyncio.create_task(self._renew_while_held(), name="outbox-leases")
        cancelling = owner.cancelling()
        try:
            yield
        except asyncio.CancelledError:
            if held.lost and owner.uncancel() <= cancelling:
                raise LeaseLostError(job.id) from None
            raise
        finally:
            if self._held.get(job.id) is held:
                del self._held[job.id]
            if not self._held:
                self._emptied.set()
            async with self._renewing:
                pass  # a renewal under way that includes the job has ended

    async def close(self) -> None:
        """Stop renewing (the worker has stopped: no delivery is in flight)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _renew_while_held(self) -> None:
        try:
            while self._held:
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._emptied.wait(), self.lease_s / 4)
                held = list(self._held.values())
                if held:
                    async with self._renewing:
                        await self._renew(held)
        finally:
            if self._task is asyncio.current_task():
                self._task = None

    async def _renew(self, held: list[_Held]) -> None:
        new_lease = utcnow() + timedelta(seconds=self.lease_s)
        ids = [h.job.id for h in held]
        parameters = [
            {"b_id": h.job.id, "b_lease": h.job.lease, "b_new_lease": new_lease} for h in held
        ]
        try:
            renewed = await self.db.run_write(_renewed, ids, new_lease, parameters)
        except Exception:
            log.exception("outbox could not renew its leases; trying again", jobs=len(held))
            now = utcnow()
            self._stop([h for h in held if now >= h.job.lease])
            return
        for h in held:
            if h.job.id in renewed:
                h.job.lease = new_lease
        self._stop([h for h in held if h.job.id not in renewed])

    def _stop(self, lost: list[_Held]) -> None:
        """Stop the deliveries of `lost` that are still under way (one that has ended writes
        its outcome where `locked_until` is its lease, which then finds the lease lost)."""
        for h in lost:
            if self._held.get(h.job.id) is not h:
                continue
            log.warning(
                "outbox lease lost during delivery; leaving the job to others", job_id=h.job.id
            )
            h.lost = True
            h.owner.cancel()


def _renewed(
    session: Session, ids: list[str], new_lease: datetime, parameters: list[dict[str, Any]]
) -> set[str]:
    """The jobs of `ids` whose lease this renewal moved to `new_lease`."""
    connection = session.connection()
    if connection.execute(_RENEW, parameters).rowcount == len(ids):
        return set(ids)
    query = {"b_ids": ids, "b_new_lease": new_lease}
    return set(connection.execute(_RENEWED, query).scalars())
