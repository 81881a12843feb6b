"""Leases that follow the work, with real `controlcenter worker` processes: a job whose process
was killed is delivered by another once the dead one's lease ends (at most the lease after the
kill), and a CRM call slower than the lease is never taken by a second worker."""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path

from controlcenter.config import Config
from controlcenter.db import utcnow
from controlcenter.onboarding.crm_sync import TAG_ONBOARDING_COMPLETE
from controlcenter.outbox.models import DONE, PENDING
from tests.conftest import RunningServer, UserFactory
from tests.fakes.crm import FakeCrm
from tests.outbox.conftest import add_job, get_job, job_status, wait_for
from tests.outbox.operator import COMPLETE_TAG, Operator, operator_location, save_settings
from tests.outbox.test_processes import COLD_START_S, worker_env, worker_process

UPSERT = ("POST", "/contacts/upsert")


async def a_job(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> tuple[str, Operator]:
    operator = operator_location(fake_crm)
    admin = await users.create("super_admin")
    await save_settings(server, operator.settings(), admin.id)
    broker = await users.create()
    return await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": broker.id}), operator


async def started(log: Path) -> None:
    await wait_for(lambda: b"outbox worker started" in log.read_bytes(), within=COLD_START_S)


async def test_a_killed_delivery_is_delivered_by_another_worker_once_its_lease_ends(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, tmp_path: Path
) -> None:
    env = worker_env(server.config, tmp_path / "var")
    lease = timedelta(seconds=Config().outbox_lease_s)  # the default a deployment runs with
    env["OUTBOX_LEASE_S"] = str(lease.total_seconds())
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    fake_crm.hold()  # the CRM holds its answer: the first worker is mid-delivery
    with worker_process(env, first_log) as first:
        await started(first_log)
        job_id, _ = await a_job(server, users, fake_crm)
        await wait_for(lambda: bool(fake_crm.calls_to(*UPSERT)), within=COLD_START_S)
        with worker_process(env, second_log) as second:
            await started(second_log)
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            killed_at = utcnow()
            calls_before = len(fake_crm.calls_to(*UPSERT))
            fake_crm.release()
            job = await get_job(server.db, job_id)
            assert job.status == PENDING and job.locked_until is not None  # the dead one's
            assert job.locked_until <= killed_at + lease  # free for another by then

            async def delivered() -> bool:
                assert second.poll() is None, second_log.read_text()
                return await job_status(server.db, job_id) == DONE

            await wait_for(delivered, within=60)
    assert len(fake_crm.calls_to(*UPSERT)) == calls_before + 1  # the second worker's, once


async def test_a_crm_call_slower_than_the_lease_is_not_taken_twice(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, tmp_path: Path
) -> None:
    env = worker_env(server.config, tmp_path / "var")  # a 3 s lease
    lease_s = float(env["OUTBOX_LEASE_S"])
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    with worker_process(env, first_log), worker_process(env, second_log):
        await started(first_log)
        await started(second_log)
        fake_crm.delay_s = lease_s * 2  # each CRM call outlasts the lease
        job_id, operator = await a_job(server, users, fake_crm)

        async def done() -> bool:
            return await job_status(server.db, job_id) == DONE

        await wait_for(done, within=60)
    job = await get_job(server.db, job_id)
    assert job.attempts == 1  # one delivery, never a second claim
    assert len(fake_crm.calls_to(*UPSERT)) == 1
    [contact] = fake_crm.contacts(operator.location_id)
    assert contact["tags"] == [COMPLETE_TAG]
    for log in (first_log, second_log):
        assert b"lease lost" not in log.read_bytes()
