"""The worker as its own process (`controlcenter worker`) and inside `controlcenter serve`."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from controlcenter.app import create_app
from controlcenter.auth.models import UserRecord
from controlcenter.config import Config
from controlcenter.db import utcnow
from controlcenter.onboarding.crm_sync import TAG_ONBOARDING_COMPLETE
from controlcenter.outbox.models import DONE, PENDING
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.crm import FakeCrm
from tests.fakes.server import LoopbackServer
from tests.outbox.conftest import add_job, fast_config, get_job, job_status, wait_for
from tests.outbox.operator import COMPLETE_TAG, operator_location, save_settings

LEASE_S = 3.0
COLD_START_S = 60.0  # a process's first imports on a busy machine


def worker_env(config: Config, var_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": config.database_url,
        "SECRET_KEY": config.secret_key or "",
        "SETTINGS_ENCRYPTION_KEY": config.settings_encryption_key or "",
        "VAR_DIR": str(var_dir),
        "CRM_BASE_URL": config.crm_base_url,
        "CRM_TIMEOUT_S": "10",
        "OUTBOX_POLL_INTERVAL_S": "0.05",
        "OUTBOX_BASE_BACKOFF_S": "0.05",
        "OUTBOX_MAX_BACKOFF_S": "0.2",
        "OUTBOX_LEASE_S": str(LEASE_S),
        "LOG_FORMAT": "json",
    }


@contextmanager
def worker_process(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    command = Path(sys.executable).parent / "controlcenter"
    with log.open("ab") as out:
        proc = subprocess.Popen([str(command), "worker"], env=env, stdout=out, stderr=out)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def test_a_worker_killed_mid_delivery_delivers_after_restart(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, tmp_path: Path
) -> None:
    operator = operator_location(fake_crm)
    admin = await users.create("super_admin")
    await save_settings(server, operator.settings(), admin.id)
    broker = await users.create()
    job_id = await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": broker.id})
    env = worker_env(server.config, tmp_path / "var")
    log = tmp_path / "worker.log"

    fake_crm.hold()  # the first call hangs: the worker is killed while it waits
    with worker_process(env, log) as first:

        def calling() -> bool:
            assert first.poll() is None, log.read_text()
            return bool(fake_crm.calls)

        await wait_for(calling, within=COLD_START_S)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    job = await get_job(server.db, job_id)
    assert job.status == PENDING and job.locked_until is not None
    assert job.locked_until > utcnow()  # still leased by the dead worker

    fake_crm.release()
    with worker_process(env, log) as second:

        async def delivered() -> bool:
            assert second.poll() is None, log.read_text()
            return await job_status(server.db, job_id) == DONE

        await wait_for(delivered, within=COLD_START_S)
        second.send_signal(signal.SIGTERM)
        assert second.wait(15) == 0  # a graceful stop
    assert b"outbox worker stopped" in log.read_bytes()

    [contact] = fake_crm.contacts(operator.location_id)  # no duplicate contact
    assert contact["email"] == broker.email
    assert contact["tags"] == [COMPLETE_TAG]  # no duplicate tag
    assert len(fake_crm.calls_to("POST", "/contacts/upsert")) == 2  # killed once, then done
    assert operator.token.encode() not in log.read_bytes()


async def test_serve_runs_the_worker_without_slowing_requests(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    operator = operator_location(fake_crm)
    admin = await users.create("super_admin")
    await save_settings(server, operator.settings(), admin.id)
    broker = await users.create()
    config = fast_config(server.config, outbox_shutdown_grace_s=0.5)
    app = create_app(config, run_worker=True)
    served = LoopbackServer(app).start()
    try:
        first = await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": broker.id})

        async def first_done() -> bool:
            return await job_status(server.db, first) == DONE

        await wait_for(first_done)
        assert fake_crm.contacts(operator.location_id)[0]["tags"] == [COMPLETE_TAG]

        # The CRM now holds its answers: a delivery is in flight, and stays so, while requests
        # come in; one that waited for it would never be answered.
        fake_crm.hold()
        calls_before = len(fake_crm.calls)
        other = await users.create()
        second = await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": other.id})
        await wait_for(lambda: len(fake_crm.calls) > calls_before)
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
            for _ in range(3):
                response = await client.post(
                    "/api/v1/auth/login", json={"email": other.email, "password": other.password}
                )
                assert response.status_code == 200
            async with writing(server.db) as db:  # a write is not held up either
                row = await db.get(UserRecord, other.id)
                assert row is not None
                row.brokerage = "Written meanwhile"
    finally:
        # The stop gives up the delivery the CRM still holds after the grace period.
        await asyncio.to_thread(served.stop)
    job = await get_job(server.db, second)
    assert (job.status, job.locked_until) == (PENDING, None)  # given back for the next start
    fake_crm.release()
