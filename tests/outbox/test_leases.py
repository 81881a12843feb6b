"""A worker's deliveries in flight keep their leases together: one renewal renews them all,
and a lease lost meanwhile stops its own delivery only."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from controlcenter.db import utcnow
from controlcenter.outbox.models import DONE, PENDING, OutboxJob
from controlcenter.outbox.worker import ClaimedJob, OutboxWorker
from tests.conftest import RunningServer
from tests.dbtools import committed_writes, writing
from tests.outbox.conftest import add_job, all_jobs, fast_config, get_job, wait_for

KIND = "test.kind"
LEASE_S = 0.4  # renewed every 0.1 s


async def test_one_renewal_renews_every_delivery_in_flight(server: RunningServer) -> None:
    release = asyncio.Event()

    async def handler(job: ClaimedJob) -> None:
        await release.wait()

    ids = [await add_job(server.db, KIND, {"n": n}) for n in range(3)]
    config = fast_config(server.config, outbox_lease_s=LEASE_S)
    worker = OutboxWorker(server.db, config, {KIND: handler})
    with committed_writes(server.db) as committed:
        delivering = asyncio.create_task(worker.run_once())
        claimed_by = utcnow() + timedelta(seconds=LEASE_S)

        async def renewed_twice() -> bool:
            renewals = [s for s in committed if any("SET locked_until" in x for x in s)]
            jobs = await all_jobs(server.db)
            return len(renewals) >= 3 and all(
                job.locked_until is not None and job.locked_until > claimed_by for job in jobs
            )

        await wait_for(renewed_twice)
        leases = {job.locked_until for job in await all_jobs(server.db)}
        release.set()
        assert await delivering == 3
    assert len(leases) == 1  # renewed together, to one lease
    # The claim, then the renewals: each one statement run for all three jobs (and, where the
    # driver counts no rows for it, the read of which it renewed).
    renewals = [s for s in committed if any("SET locked_until=" in x for x in s)][1:]
    assert renewals and all(
        [x.lstrip()[:6] for x in statements] in (["UPDATE"], ["UPDATE", "SELECT"])
        for statements in renewals
    )
    for job_id in ids:
        job = await get_job(server.db, job_id)
        assert (job.status, job.attempts, job.locked_until) == (DONE, 1, None)


async def test_a_lost_lease_stops_its_own_delivery_only(server: RunningServer) -> None:
    release = asyncio.Event()
    stopped: list[str] = []

    async def handler(job: ClaimedJob) -> None:
        try:
            await release.wait()
        except asyncio.CancelledError:
            stopped.append(job.id)
            raise

    kept, taken = [await add_job(server.db, KIND, {"n": n}) for n in range(2)]
    config = fast_config(server.config, outbox_lease_s=LEASE_S)
    worker = OutboxWorker(server.db, config, {KIND: handler})
    delivering = asyncio.create_task(worker.run_once())
    await wait_for(lambda: _leased(server, taken))
    thief = utcnow() + timedelta(seconds=60)
    async with writing(server.db) as db:  # another worker took the job after our lease ran out
        row = await db.get(OutboxJob, taken)
        assert row is not None
        row.locked_until = thief
    await wait_for(lambda: stopped == [taken])
    release.set()
    assert await delivering == 2
    assert (await get_job(server.db, kept)).status == DONE
    job = await get_job(server.db, taken)
    assert (job.status, job.attempts, job.locked_until) == (PENDING, 0, thief)


async def _leased(server: RunningServer, job_id: str) -> bool:
    return (await get_job(server.db, job_id)).locked_until is not None
