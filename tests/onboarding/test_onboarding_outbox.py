"""The side effects of a save as outbox jobs in the record's transaction."""

from __future__ import annotations

from typing import Any, cast

import httpx
import pytest
from sqlalchemy import select

from controlcenter.outbox.enqueue import pending
from controlcenter.outbox.kinds import JobKind
from controlcenter.outbox.models import OutboxJob
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import reading

URL = "/api/v1/onboarding"
COMPLETE, HIGH_GCI, SYNC = "crm.tag_onboarding_complete", "crm.tag_high_gci", "crm.sync_user"


async def jobs(server: RunningServer) -> list[tuple[str, dict[str, Any], str, int]]:
    """Each job's kind, payload (without the request id, see below), status and attempts."""
    async with reading(server.db) as db:
        rows = (await db.scalars(select(OutboxJob))).all()
    return sorted(
        (row.kind, {k: v for k, v in row.payload.items() if k != "requestId"}, row.status,
         row.attempts)
        for row in rows
    )  # fmt: skip


async def test_jobs_carry_the_id_of_the_request_that_wrote_them(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.post(
        URL, json={"gciLast12Months": "250"}, headers={**user.headers, "X-Request-ID": "req-42"}
    )
    assert response.headers["X-Request-ID"] == "req-42"
    async with reading(server.db) as db:
        rows = (await db.scalars(select(OutboxJob))).all()
    assert len(rows) == 3 and {row.payload["requestId"] for row in rows} == {"req-42"}


@pytest.mark.parametrize(
    ("gci", "high"),
    [
        ("$100k-$250k", True),
        ("100", True),
        ("over 250k", True),
        ("1000000", True),  # the answer contains the substring
        ("$50k-$99k", False),
        ("", False),
        ("10 0", False),
    ],
)
async def test_each_save_writes_its_jobs(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, gci: str, high: bool
) -> None:
    user = await users.create()
    response = await client.post(URL, json={"gciLast12Months": gci}, headers=user.headers)
    assert response.status_code == 200
    expected = [
        (COMPLETE, {"userId": user.id}, "pending", 0),
        (SYNC, {"userId": user.id}, "pending", 0),
    ]
    if high:
        expected.append((HIGH_GCI, {"userId": user.id, "gci": gci}, "pending", 0))
    assert await jobs(server) == sorted(expected)


async def test_gci_is_judged_on_the_request_not_the_stored_record(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    await client.post(URL, json={"gciLast12Months": "250k+"}, headers=user.headers)
    assert len(await jobs(server)) == 3
    # The stored gci still says 250k+, but this request has none ("empty when absent").
    response = await client.post(URL, json={"yearsInBusiness": "4"}, headers=user.headers)
    assert response.json()["onboarding"]["gciLast12Months"] == "250k+"
    kinds = [kind for kind, *_ in await jobs(server)]
    assert sorted(kinds) == sorted([COMPLETE, HIGH_GCI, SYNC, COMPLETE, SYNC])


async def test_rejected_saves_write_no_jobs(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    await client.post(URL, json={"gciLast12Months": 100}, headers=user.headers)
    await client.post(URL, content=b"{", headers=user.headers)
    await client.post(URL, json={"gciLast12Months": "100"})
    assert await jobs(server) == []


def test_an_unknown_kind_is_refused_before_anything_is_written() -> None:
    with pytest.raises(ValueError, match="unknown outbox job kind"):
        # A plain string, not a declared kind, as an untyped caller could pass.
        pending((cast(JobKind, "crm.launch_rockets"), {}))
