"""The three jobs of one onboarding save, each delivered on its own against the strict fake
CRM (docs/outbox.md): together they leave the contact with every answer and both tags, the
agency's own tags and values kept; a job whose tag setting is missing waits alone. On SQLite
and PostgreSQL."""

from __future__ import annotations

from controlcenter.onboarding.crm_sync import SYNC_USER, TAG_HIGH_GCI, TAG_ONBOARDING_COMPLETE
from controlcenter.outbox.models import DONE, PENDING
from tests.conftest import RunningServer, UserFactory
from tests.fakes.crm import FakeCrm
from tests.outbox.conftest import add_job, get_job
from tests.outbox.operator import (
    COMPLETE_TAG,
    HIGH_GCI_TAG,
    REFERRAL_KEY,
    Operator,
    operator_location,
    save_settings,
)
from tests.outbox.test_delivery import broker, worker_for

GCI_KEY = "contact.gci_last_12_months"


async def _save_jobs(server: RunningServer, user_id: str, gci: str) -> list[str]:
    """The three jobs of one high-GCI save, as the onboarding transaction writes them."""
    return [
        await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": user_id}),
        await add_job(server.db, TAG_HIGH_GCI, {"userId": user_id, "gci": gci}),
        await add_job(server.db, SYNC_USER, {"userId": user_id}),
    ]


async def _operator(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm, *, without: str = ""
) -> Operator:
    """The operator's location, its settings saved by a super administrator (`without` one)."""
    op = operator_location(fake_crm)
    admin = await users.create("super_admin")
    settings = {k: v for k, v in op.settings().items() if k != without}
    await save_settings(server, settings, admin.id)
    return op


async def test_a_saves_three_jobs_leave_every_answer_and_both_tags(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    op = await _operator(server, users, fake_crm)
    user = await broker(server, users, gciLast12Months="$250k+", yearsInBusiness="5-10")
    kept = {"id": op.field_ids[REFERRAL_KEY], "field_value": "Conference"}
    fake_crm.add_contact(op.location_id, email=user.email, tags=["vip"], customFields=[kept])
    jobs = await _save_jobs(server, user.id, "$250k+")
    assert await worker_for(server).run_once() == 3

    for job_id in jobs:
        job = await get_job(server.db, job_id)
        assert (job.status, job.attempts, job.last_error) == (DONE, 1, None)
    upserts = [c for c in fake_crm.calls if c.path == "/contacts/upsert"]
    assert len(upserts) == 3
    assert all("tags" not in call.body for call in upserts)  # it would replace the tags
    [contact] = fake_crm.contacts(op.location_id)
    assert sorted(contact["tags"]) == sorted(["vip", COMPLETE_TAG, HIGH_GCI_TAG])
    assert fake_crm.custom_values(contact["id"]) == {
        REFERRAL_KEY: "Conference",  # the agency's value kept
        GCI_KEY: "$250k+",
        "contact.years_in_business": "5-10",
    }


async def test_a_job_missing_its_tag_setting_waits_alone(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    op = await _operator(server, users, fake_crm, without="tagHighGCI")
    user = await broker(server, users, gciLast12Months="$250k+")
    complete, high, sync = await _save_jobs(server, user.id, "$250k+")
    assert await worker_for(server).run_once() == 3

    assert (await get_job(server.db, complete)).status == DONE
    assert (await get_job(server.db, sync)).status == DONE
    waiting = await get_job(server.db, high)
    assert (waiting.status, waiting.attempts, waiting.last_error) == (
        PENDING,
        0,
        "missing settings: tagHighGCI",
    )
    [contact] = fake_crm.contacts(op.location_id)
    assert contact["tags"] == [COMPLETE_TAG]
