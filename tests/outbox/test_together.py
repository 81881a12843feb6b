"""One broker's jobs that start together are delivered together (docs/outbox.md): one upsert
and one tags call for a save's three jobs, against the strict fake CRM, each job still ending
on its own. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from types import FrameType
from typing import Any

import pytest

from controlcenter.db import utcnow
from controlcenter.onboarding.coalesce import Coalescer
from controlcenter.onboarding.crm_sync import (
    KINDS,
    SYNC_USER,
    TAG_HIGH_GCI,
    TAG_ONBOARDING_COMPLETE,
)
from controlcenter.outbox.enqueue import job_values
from controlcenter.outbox.models import DONE, PENDING, OutboxJob
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


async def test_a_saves_three_jobs_are_one_upsert_and_one_tags_call(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    op = await _operator(server, users, fake_crm)
    user = await broker(server, users, gciLast12Months="$250k+", yearsInBusiness="5-10")
    kept = {"id": op.field_ids[REFERRAL_KEY], "field_value": "Conference"}
    existing = fake_crm.add_contact(
        op.location_id, email=user.email, tags=["vip"], customFields=[kept]
    )
    jobs = await _save_jobs(server, user.id, "$250k+")
    assert await worker_for(server).run_once() == 3

    for job_id in jobs:
        job = await get_job(server.db, job_id)
        assert (job.status, job.attempts, job.last_error) == (DONE, 1, None)
    # Two requests for three jobs (five, one job at a time), besides the fields' lookup.
    sent = [c for c in fake_crm.calls if c.location_id and "customFields" not in c.path]
    assert [(c.method, c.path) for c in sent] == [
        ("POST", "/contacts/upsert"),
        ("POST", f"/contacts/{existing['id']}/tags"),
    ]
    upsert, tags = sent
    assert "tags" not in upsert.body  # it would replace the contact's tags
    assert upsert.body["customFields"] == [
        {"id": op.field_ids[GCI_KEY], "field_value": "$250k+"},
        {"id": op.field_ids["contact.years_in_business"], "field_value": "5-10"},
    ]
    assert tags.body == {"tags": [COMPLETE_TAG, HIGH_GCI_TAG]}
    [contact] = fake_crm.contacts(op.location_id)
    assert contact["tags"] == ["vip", COMPLETE_TAG, HIGH_GCI_TAG]  # the agency's tag kept
    assert fake_crm.custom_values(contact["id"]) == {
        REFERRAL_KEY: "Conference",
        GCI_KEY: "$250k+",
        "contact.years_in_business": "5-10",
    }


async def test_the_latest_answer_wins_over_the_value_a_job_carried(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    """As one job at a time: the sync, reading the record when it runs, leaves the latest."""
    op = await _operator(server, users, fake_crm)
    user = await broker(server, users, gciLast12Months="$50k")  # saved again since
    await _save_jobs(server, user.id, "$250k+")
    assert await worker_for(server).run_once() == 3
    [contact] = fake_crm.contacts(op.location_id)
    assert fake_crm.custom_values(contact["id"])[GCI_KEY] == "$50k"
    assert contact["tags"] == [COMPLETE_TAG, HIGH_GCI_TAG]


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


async def test_a_429_gives_every_job_of_the_batch_back_without_an_attempt(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    op = await _operator(server, users, fake_crm)
    user = await broker(server, users, gciLast12Months="$250k+")
    jobs = await _save_jobs(server, user.id, "$250k+")
    fake_crm.rate_limit(1, retry_after="30")
    assert await worker_for(server).run_once() == 3
    back = [await get_job(server.db, job_id) for job_id in jobs]
    for job in back:
        assert (job.status, job.attempts) == (PENDING, 0)
        assert (job.next_attempt_at - job.created_at).total_seconds() > 20
    # Due again at one moment, so that one claim takes them together again.
    assert len({job.next_attempt_at for job in back}) == 1
    assert fake_crm.contacts(op.location_id) == []


async def test_a_claim_takes_the_jobs_due_at_the_moment_of_its_last_whole(
    server: RunningServer,
) -> None:
    now = utcnow()
    saves = [
        [job_values(kind, {"userId": f"u{n}"}, now - timedelta(seconds=10 - n)) for kind in KINDS]
        for n in range(2)
    ]
    async with server.db.write() as session:
        session.add_all([OutboxJob(**job) for save in saves for job in save])
    worker = worker_for(server)
    claimed = await worker.claim(4)  # the first save and one job of the second: all of it
    assert len(claimed) == 6
    assert await worker.claim(4) == []


async def test_a_send_outlives_a_cancelled_member_not_all_of_them() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    sent: list[list[str]] = []

    async def send(key: str, parts: list[str]) -> list[BaseException | None]:
        started.set()
        await release.wait()
        sent.append(parts)
        return [None if part != "bad" else ValueError(part) for part in parts]

    batches: Coalescer[str, str] = Coalescer(send)
    first = asyncio.create_task(batches.join("u1", "a"))
    second = asyncio.create_task(batches.join("u1", "bad"))
    other = asyncio.create_task(batches.join("u2", "c"))
    await started.wait()
    first.cancel()
    release.set()
    with pytest.raises(ValueError, match="bad"):
        await second
    await other
    assert sorted(sent) == [["a", "bad"], ["c"]]
    assert first.cancelled()

    release.clear()
    lonely = asyncio.create_task(batches.join("u1", "d"))
    await asyncio.sleep(0.01)
    lonely.cancel()
    await asyncio.gather(lonely, return_exceptions=True)
    await asyncio.sleep(0)
    assert len(sent) == 2  # nobody waited for it: the send was cancelled
    late = asyncio.create_task(batches.join("u1", "e"))  # a new batch, not the cancelled one
    release.set()
    await late
    assert sent[-1] == ["e"]


async def test_outcomes_that_end_together_share_one_write_transaction(
    server: RunningServer,
    users: UserFactory,
    fake_crm: FakeCrm,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On SQLite each write transaction waits for the one write lock beside the saves."""
    await _operator(server, users, fake_crm)
    user = await broker(server, users, gciLast12Months="$250k+")
    jobs = await _save_jobs(server, user.id, "$250k+")
    opened: list[str] = []

    def counted(name: str) -> Any:
        def opening() -> Any:
            caller: FrameType | None = sys._getframe(1)
            while caller is not None and caller.f_code.co_name not in ("_finish", "_commit"):
                caller = caller.f_back
            if caller is not None:  # an outcome's, not a claim's or the test's own
                opened.append(name)
            return original()

        original = getattr(server.db, name)
        return opening

    monkeypatch.setattr(server.db, "write", counted("write"))
    assert await worker_for(server).run_once() == 3
    assert len(opened) == 1
    assert [(await get_job(server.db, job_id)).status for job_id in jobs] == [DONE] * 3
