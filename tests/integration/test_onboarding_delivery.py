"""Onboarding answers reach the operator's CRM: POST, outbox, the worker, the fake CRM."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from controlcenter.db import utcnow
from controlcenter.outbox.models import DONE, OutboxJob
from controlcenter.outbox.runtime import RunningWorker
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.crm import FakeCrm
from tests.integration.conftest import new_worker
from tests.outbox.conftest import all_jobs, wait_for
from tests.outbox.operator import COMPLETE_TAG, HIGH_GCI_TAG, REFERRAL_KEY, Operator

ONBOARDING = "/api/v1/onboarding"
ANSWERS: dict[str, Any] = {
    "brokerageName": "Harbor Commercial",
    "yearsInBusiness": "5-10",
    "usingOtherCrm": True,
    "currentCrmName": "Spreadsheets",
    "goalsSelected": ["more leads", "automation"],
}
SYNCED = {
    "contact.years_in_business": "5-10",
    "contact.using_other_crm": "Yes",
    "contact.current_crm_name": "Spreadsheets",
    "contact.goals_selected": ["more leads", "automation"],
}
GCI_KEY = "contact.gci_last_12_months"


async def onboard(client: httpx.AsyncClient, user: AppUser, gci: str) -> None:
    """POST the onboarding answers; the answer must be a success."""
    response = await client.post(
        ONBOARDING, json={**ANSWERS, "gciLast12Months": gci}, headers=user.headers
    )
    assert response.status_code == 200, response.text


async def all_done(server: RunningServer) -> bool:
    jobs = await all_jobs(server.db)
    return bool(jobs) and all(job.status == DONE for job in jobs)


def synced(fields: dict[str, Any]) -> bool:
    return all(fields[key] == value for key, value in SYNCED.items())


@pytest.mark.parametrize(("gci", "high"), [("$100k-$250k", True), ("$50k-$99k", False)])
async def test_onboarding_tags_and_syncs_the_broker_at_the_operators_crm(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    fake_crm: FakeCrm,
    operator: Operator,
    worker: RunningWorker,
    gci: str,
    high: bool,
) -> None:
    broker = await users.create()
    kept = {"id": operator.field_ids[REFERRAL_KEY], "field_value": "Conference"}
    existing = fake_crm.add_contact(
        operator.location_id, email=broker.email, tags=["vip"], customFields=[kept]
    )
    await onboard(client, broker, gci)
    await wait_for(lambda: all_done(server))

    [contact] = fake_crm.contacts(operator.location_id)
    assert contact["id"] == existing["id"]  # found by e-mail, not created a second time
    expected_tags = ["vip", COMPLETE_TAG, *([HIGH_GCI_TAG] if high else [])]
    assert sorted(contact["tags"]) == sorted(expected_tags)  # the existing tag kept
    assert contact["name"] == broker.name and contact["companyName"] == "Harbor Commercial"
    fields = fake_crm.custom_values(contact["id"])
    assert fields[REFERRAL_KEY] == "Conference"
    assert fields[GCI_KEY] == gci
    assert synced(fields)
    # Every call went to the operator's location with its private token, with the tags
    # through the tags endpoint (the upserts never send `tags`, which would replace them).
    assert fake_crm.calls
    for call in fake_crm.calls:
        assert (call.token_kind, call.location_id, call.status) == (
            "location",
            operator.location_id,
            201 if call.path.endswith("/tags") else 200,
        )
    assert all("tags" not in c.body for c in fake_crm.calls_to("POST", "/contacts/upsert"))
    tag_calls = fake_crm.calls_to("POST", f"/contacts/{existing['id']}/tags")
    assert sorted(tag for c in tag_calls for tag in c.body["tags"]) == sorted(expected_tags[1:])


async def test_the_crm_down_for_a_while_delays_delivery_but_never_the_answer(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    fake_crm: FakeCrm,
    operator: Operator,
    worker: RunningWorker,
) -> None:
    brokers = [await users.create() for _ in range(6)]
    before, during = brokers[:2], brokers[2:]
    for broker in before:
        await onboard(client, broker, "$100k-$250k")
    await wait_for(lambda: all_done(server))

    # Down, and slow to say so: the CRM holds every call until released, then answers 503. A
    # request that waited for the CRM would never be answered.
    fake_crm.outage(503)
    fake_crm.hold()
    try:
        for broker in during:
            await onboard(client, broker, "$100k-$250k")
    finally:
        fake_crm.release()

    async def every_job_failed_once() -> bool:
        jobs = [j for j in await all_jobs(server.db) if j.status != DONE]
        return len(jobs) == 3 * len(during) and all(
            j.attempts >= 1 and "503" in (j.last_error or "") for j in jobs
        )

    await wait_for(every_job_failed_once, within=15)
    assert len(fake_crm.contacts(operator.location_id)) == len(before)  # nothing got through

    fake_crm.outage(None)
    await wait_for(lambda: all_done(server), within=15)

    contacts = fake_crm.contacts(operator.location_id)
    assert sorted(c["email"] for c in contacts) == sorted(b.email for b in brokers)  # each once
    for contact in contacts:
        assert sorted(contact["tags"]) == sorted([COMPLETE_TAG, HIGH_GCI_TAG])  # no duplicates
        assert fake_crm.custom_values(contact["id"])[GCI_KEY] == "$100k-$250k"


@pytest.mark.parametrize("first", ["crm.tag_high_gci", "crm.sync_user"])
async def test_high_gci_and_sync_in_either_order_leave_both_on_the_contact(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    fake_crm: FakeCrm,
    operator: Operator,
    first: str,
) -> None:
    broker = await users.create()
    await onboard(client, broker, "$250k+")
    # Hold back every job but `first`, deliver it, then deliver the rest.
    later = utcnow() + timedelta(days=1)
    async with writing(server.db) as db:
        await db.execute(
            update(OutboxJob).where(OutboxJob.kind != first).values(next_attempt_at=later)
        )
    outbox = new_worker(server)
    assert await outbox.run_once() == 1
    async with writing(server.db) as db:
        await db.execute(update(OutboxJob).values(next_attempt_at=OutboxJob.created_at))
    assert await outbox.run_once() == 2
    assert await all_done(server)

    [contact] = fake_crm.contacts(operator.location_id)
    fields = fake_crm.custom_values(contact["id"])
    assert fields[GCI_KEY] == "$250k+"
    assert synced(fields)
    assert sorted(contact["tags"]) == sorted([COMPLETE_TAG, HIGH_GCI_TAG])
    # The two upserts carrying custom fields came in the order under test.
    sent = [
        c.body["customFields"]
        for c in fake_crm.calls_to("POST", "/contacts/upsert")
        if "customFields" in c.body
    ]
    high = [{"id": operator.field_ids[GCI_KEY], "field_value": "$250k+"}]
    assert sent[0 if first == "crm.tag_high_gci" else 1] == high
    assert len(sent) == 2 and len(sent[1 if first == "crm.tag_high_gci" else 0]) == 5
