"""The three onboarding jobs delivered to the operator's location at the loopback fake CRM."""

from __future__ import annotations

import asyncio
import json

import pytest
from structlog.testing import capture_logs

from controlcenter.app import WORKER_WAKES
from controlcenter.auth.models import UserRecord
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.onboarding.crm_sync import (
    SYNC_USER,
    TAG_HIGH_GCI,
    TAG_ONBOARDING_COMPLETE,
    CrmSync,
    custom_field_key,
)
from controlcenter.onboarding.models import Onboarding
from controlcenter.outbox.models import DEAD, DONE, PENDING
from controlcenter.outbox.worker import OutboxWorker
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import reading, writing
from tests.fakes.crm import FakeCrm
from tests.outbox.conftest import (
    add_job,
    all_jobs,
    fast_config,
    get_job,
    job_delivered,
    job_tried,
    running,
    wait_for,
)
from tests.outbox.operator import (
    COMPLETE_TAG,
    HIGH_GCI_TAG,
    Operator,
    operator_location,
    save_settings,
)


def worker_for(server: RunningServer, config: Config | None = None) -> OutboxWorker:
    config = config or fast_config(server.config)
    return OutboxWorker(server.db, config, server.worker_handlers(), wake_on=WORKER_WAKES)


@pytest.fixture
async def operator(fake_crm: FakeCrm, server: RunningServer, users: UserFactory) -> Operator:
    op = operator_location(fake_crm)
    admin = await users.create("super_admin")
    await save_settings(server, op.settings(), admin.id)
    return op


async def broker(server: RunningServer, users: UserFactory, **answers: object) -> AppUser:
    user = await users.create()
    async with writing(server.db) as db:
        row = await db.get(UserRecord, user.id)
        assert row is not None
        row.name = "Dana Broker"
        row.brokerage = "Acme Commercial"
        db.add(Onboarding(userId=user.id, **answers))
    return user


def upserts(fake: FakeCrm) -> list[dict[str, object]]:
    return [call.body for call in fake.calls_to("POST", "/contacts/upsert")]


async def test_onboarding_complete_tags_the_broker_keeping_existing_tags(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, operator: Operator
) -> None:
    user = await broker(server, users)
    existing = fake_crm.add_contact(operator.location_id, email=user.email, tags=["vip"])
    job_id = await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": user.id})
    assert await worker_for(server).run_once() == 1
    assert (await get_job(server.db, job_id)).status == DONE
    [contact] = fake_crm.contacts(operator.location_id)
    assert contact["id"] == existing["id"]  # found by e-mail, not created again
    assert contact["tags"] == ["vip", COMPLETE_TAG]
    assert contact["name"] == "Dana Broker" and contact["companyName"] == "Acme Commercial"
    [tag_call] = fake_crm.calls_to("POST", f"/contacts/{existing['id']}/tags")
    assert tag_call.body == {"tags": [COMPLETE_TAG]}
    assert tag_call.location_id == operator.location_id


async def test_high_gci_tags_the_broker_and_passes_the_value(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, operator: Operator
) -> None:
    user = await broker(server, users, gciLast12Months="$250k+")
    await add_job(server.db, TAG_HIGH_GCI, {"userId": user.id, "gci": "$250k+"})
    assert await worker_for(server).run_once() == 1
    [contact] = fake_crm.contacts(operator.location_id)
    assert contact["email"] == user.email and contact["tags"] == [HIGH_GCI_TAG]
    [body] = upserts(fake_crm)
    gci_id = operator.field_ids["contact.gci_last_12_months"]
    assert body["customFields"] == [{"id": gci_id, "field_value": "$250k+"}]
    assert fake_crm.custom_values(contact["id"]) == {"contact.gci_last_12_months": "$250k+"}
    [lookup] = fake_crm.calls_to("GET", f"/locations/{operator.location_id}/customFields")
    assert lookup.query == {"model": "contact"} and lookup.status == 200


async def test_a_field_missing_at_the_location_is_left_out_and_the_tag_still_applied(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    op = operator_location(fake_crm, fields=False)
    admin = await users.create("super_admin")
    await save_settings(server, op.settings(), admin.id)
    user = await broker(server, users, gciLast12Months="$250k+", yearsInBusiness="5-10")
    high = await add_job(server.db, TAG_HIGH_GCI, {"userId": user.id, "gci": "$250k+"})
    sync = await add_job(server.db, SYNC_USER, {"userId": user.id})
    with capture_logs() as logs:
        assert await worker_for(server).run_once() == 2
    assert (await get_job(server.db, high)).status == DONE
    assert (await get_job(server.db, sync)).status == DONE
    [contact] = fake_crm.contacts(op.location_id)
    assert contact["tags"] == [HIGH_GCI_TAG]
    assert all("customFields" not in body for body in upserts(fake_crm))
    missing = [e for e in logs if e["event"] == "crm custom fields missing"]
    assert sorted(e["keys"] for e in missing) == [
        ["contact.gci_last_12_months"],
        ["contact.years_in_business", "contact.gci_last_12_months"],
    ]
    assert all(e["location_id"] == op.location_id for e in missing)


async def test_the_field_ids_are_looked_up_once_per_location(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, operator: Operator
) -> None:
    user = await broker(server, users, gciLast12Months="$250k+")
    delivery = CrmSync(server.db, server.settings, server.crm)
    worker = OutboxWorker(server.db, fast_config(server.config), delivery.handlers())
    for _ in range(3):
        await add_job(server.db, TAG_HIGH_GCI, {"userId": user.id, "gci": "$250k+"})
        assert await worker.run_once() == 1
    lookups = fake_crm.calls_to("GET", f"/locations/{operator.location_id}/customFields")
    assert len(lookups) == 1


async def test_sync_sends_the_latest_answers(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, operator: Operator
) -> None:
    user = await broker(
        server,
        users,
        yearsInBusiness="5-10",
        usingOtherCrm=False,
        goalsSelected=json.dumps(["more leads", "automation"]),
    )
    await add_job(server.db, SYNC_USER, {"userId": user.id})
    async with writing(server.db) as db:  # changed after the job was written: the latest wins
        row = await db.get(Onboarding, (await _onboarding_id(server.db, user.id)))
        assert row is not None
        row.yearsInBusiness = "10+"
    assert await worker_for(server).run_once() == 1
    [body] = upserts(fake_crm)
    ids = operator.field_ids
    assert body == {
        "email": user.email,
        "name": "Dana Broker",
        "companyName": "Acme Commercial",
        "locationId": operator.location_id,
        "customFields": [
            {"id": ids["contact.years_in_business"], "field_value": "10+"},
            {"id": ids["contact.using_other_crm"], "field_value": "No"},
            {"id": ids["contact.goals_selected"], "field_value": ["more leads", "automation"]},
        ],
    }
    [contact] = fake_crm.contacts(operator.location_id)
    assert contact["email"] == user.email and contact["tags"] == []


async def _onboarding_id(db: Database, user_id: str) -> str:
    from sqlalchemy import select

    async with reading(db) as session:
        found = await session.scalar(select(Onboarding.id).where(Onboarding.userId == user_id))
    assert found is not None
    return found


def test_custom_field_keys() -> None:
    assert custom_field_key("gciLast12Months") == "contact.gci_last_12_months"
    assert custom_field_key("leadsPerMonthTarget") == "contact.leads_per_month_target"
    assert custom_field_key("usingOtherCrm") == "contact.using_other_crm"


async def test_all_three_jobs_are_idempotent(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, operator: Operator
) -> None:
    user = await broker(server, users, gciLast12Months="100k")
    payloads = [
        (TAG_ONBOARDING_COMPLETE, {"userId": user.id}),
        (TAG_HIGH_GCI, {"userId": user.id, "gci": "100k"}),
        (SYNC_USER, {"userId": user.id}),
    ]
    for _ in range(2):  # delivered twice, as after a lost lease
        for kind, payload in payloads:
            await add_job(server.db, kind, payload)
        await worker_for(server).run_once()
    [contact] = fake_crm.contacts(operator.location_id)
    assert sorted(contact["tags"]) == sorted([COMPLETE_TAG, HIGH_GCI_TAG])
    assert all(job.status == DONE for job in await all_jobs(server.db))


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (None, "missing settings: crmPrivateToken"),
        *[
            (bad, "unusable setting: crmPrivateToken (a credential must be printable ASCII)")
            for bad in ("pit-ünïcødé-token-0001", "pit-token\n-0001", "pit\x00token")
        ],
    ],
)
async def test_missing_or_unusable_settings_wait_then_deliver_once_saved(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, token: str | None, expected: str
) -> None:
    """The job waits without using attempts; a credential that cannot travel in a header is a
    configuration error naming the setting, never a traceback per attempt."""
    op = operator_location(fake_crm)
    admin = await users.create("super_admin")
    user = await broker(server, users)
    values = {**op.settings(), "crmPrivateToken": token or ""}
    await save_settings(server, {k: v for k, v in values.items() if v}, admin.id)
    job_id = await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": user.id})
    config = fast_config(server.config, outbox_settings_recheck_s=0.05)
    worker = worker_for(server, config)
    with capture_logs() as logs:
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(0.5)  # about ten re-checks
        job = await get_job(server.db, job_id)
        assert (job.status, job.attempts, job.last_error) == (PENDING, 0, expected)
        assert fake_crm.calls == []  # nothing sent without a usable credential
        await save_settings(server, {"crmPrivateToken": op.token}, admin.id)
        await wait_for(lambda: job_delivered(server.db, job_id))
        await worker.stop()
        await task
    # One line when it starts waiting and one when it stops, however many re-checks between.
    [waiting] = [e for e in logs if e["event"] == "outbox job waits for settings"]
    assert waiting["missing"] == ["crmPrivateToken"] and waiting["job_id"] == job_id
    assert waiting["problem"] == expected
    [resumed] = [e for e in logs if e["event"] == "outbox job stops waiting for settings"]
    assert resumed["job_id"] == job_id
    assert [e["event"] for e in logs if e["log_level"] in ("error", "critical")] == []
    assert not any("exc_info" in e or "traceback" in e for e in logs)
    assert token is None or all(token not in str(e) for e in logs)
    [contact] = fake_crm.contacts(op.location_id)
    assert contact["tags"] == [COMPLETE_TAG]


async def test_a_job_waiting_for_settings_goes_as_soon_as_they_are_saved(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    """Not after its recheck (an hour here): the settings store's save wakes the worker."""
    op = operator_location(fake_crm)
    admin = await users.create("super_admin")
    user = await broker(server, users)
    job_id = await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": user.id})
    worker = worker_for(server, fast_config(server.config, outbox_settings_recheck_s=3600.0))
    async with running(worker):
        await wait_for(lambda: job_tried(server.db, job_id))
        await save_settings(server, op.settings(), admin.id)
        await wait_for(lambda: job_delivered(server.db, job_id))
    [contact] = fake_crm.contacts(op.location_id)
    assert contact["tags"] == [COMPLETE_TAG]


async def test_crm_down_for_a_while_then_delivered(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, operator: Operator
) -> None:
    user = await broker(server, users)
    job_id = await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": user.id})
    fake_crm.outage(503)
    worker = worker_for(server)
    with capture_logs() as logs:
        task = asyncio.create_task(worker.run())

        async def failed_twice() -> bool:
            return (await get_job(server.db, job_id)).attempts >= 2

        await wait_for(failed_twice)
        job = await get_job(server.db, job_id)
        assert job.status == PENDING and job.last_error == "CRM error 503: Service Unavailable"
        fake_crm.outage(None)
        await wait_for(lambda: job_delivered(server.db, job_id))
        await worker.stop()
        await task
    [contact] = fake_crm.contacts(operator.location_id)
    assert contact["tags"] == [COMPLETE_TAG]
    failures = [e for e in logs if e["event"] == "outbox delivery failed, will retry"]
    assert failures and failures[0]["error"] == "CRM error 503: Service Unavailable"
    assert operator.token not in repr(logs)


async def test_unreachable_crm_until_max_age_marks_the_job_dead(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, operator: Operator
) -> None:
    user = await broker(server, users)
    job_id = await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": user.id})
    fake_crm.refuse_connections()
    config = fast_config(server.config, outbox_max_age_s=0.4)
    worker = worker_for(server, config)
    task = asyncio.create_task(worker.run())

    async def dead() -> bool:
        return (await get_job(server.db, job_id)).status == DEAD

    await wait_for(dead)
    await worker.stop()
    await task
    job = await get_job(server.db, job_id)
    assert job.attempts >= 1 and job.last_error == "CRM unreachable (could not connect)"


async def test_a_wrong_token_is_retried_and_never_leaks(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, operator: Operator
) -> None:
    admin = await users.create("super_admin")
    wrong = "pit-wrong-token-0123456789abcdef"
    await save_settings(server, {"crmPrivateToken": wrong}, admin.id)
    user = await broker(server, users)
    job_id = await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": user.id})
    worker = worker_for(server)
    with capture_logs() as logs:
        await worker.run_once()
    job = await get_job(server.db, job_id)
    assert (job.status, job.attempts, job.last_error) == (PENDING, 1, "CRM error 401: Invalid JWT")
    assert wrong not in repr(logs)
    # The operator fixes the token; the next attempt delivers.
    await save_settings(server, {"crmPrivateToken": operator.token}, admin.id)
    async with writing(server.db) as db:
        from controlcenter.outbox.models import OutboxJob

        row = await db.get(OutboxJob, job_id)
        assert row is not None
        row.next_attempt_at = job.created_at
    assert await worker.run_once() == 1
    assert (await get_job(server.db, job_id)).status == DONE


async def test_a_job_for_a_deleted_user_is_dead_at_once(
    server: RunningServer, fake_crm: FakeCrm, operator: Operator
) -> None:
    job_id = await add_job(server.db, SYNC_USER, {"userId": "no-such-user"})
    await worker_for(server).run_once()
    job = await get_job(server.db, job_id)
    assert (job.status, job.last_error) == (DEAD, "user no-such-user no longer exists")
    assert fake_crm.calls == []
