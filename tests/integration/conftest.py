"""What the end-to-end tests share: the real CRM catalogue, brokers linked to locations at the
fake CRM, the operator's location, and a worker delivering in the background.

Unlike tests/chat, nothing here sets the built-in CRM tools aside: the model is offered the
real catalogue and every call goes through the real client to the fake.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from controlcenter.auth.models import UserRecord
from controlcenter.outbox.runtime import RunningWorker
from controlcenter.outbox.worker import OutboxWorker
from tests.chat.conftest import llm as llm  # both providers, each asserting `invalid == []`
from tests.chat.helpers import Llm, set_settings
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.crm import FakeCrm
from tests.outbox.conftest import fast_config
from tests.outbox.operator import Operator, operator_location, save_settings


def results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The toolResult of every tool_result event, in order."""
    return [e["toolResult"] for e in events if e["type"] == "tool_result"]


AGENCY_KEY = "agency-oauth-token-integration-0001"
COMPANY_ID = "companyIntegration01"


@dataclass
class Agency:
    """The agency whose sub-accounts (locations) the brokers work in."""

    fake: FakeCrm
    server: RunningServer

    def location(self) -> str:
        return str(self.fake.add_location(company_id=COMPANY_ID)["id"])

    async def broker(self, users: UserFactory, llm: Llm, location_id: str | None) -> AppUser:
        """A user with the provider's key, linked to `location_id` (None: not linked)."""
        user = await users.create()
        await set_settings(self.server, {llm.setting: llm.fake.api_key}, user)
        await link(self.server, user.id, location_id)
        return user


async def link(server: RunningServer, user_id: str, location_id: str | None) -> None:
    """What `controlcenter users set-crm` does."""
    async with writing(server.db) as db:
        user = await db.get(UserRecord, user_id)
        assert user is not None
        user.crm_location_id = location_id


@pytest.fixture
async def agency(server: RunningServer, users: UserFactory, fake_crm: FakeCrm) -> Agency:
    fake_crm.add_agency(COMPANY_ID, AGENCY_KEY)
    admin = await users.create("super_admin")
    await save_settings(
        server, {"crmAgencyApiKey": AGENCY_KEY, "crmAgencyId": COMPANY_ID}, admin.id
    )
    return Agency(fake_crm, server)


@pytest.fixture
async def operator(fake_crm: FakeCrm, server: RunningServer, users: UserFactory) -> Operator:
    """The operator's own location and its settings, saved as an administrator would."""
    op = operator_location(fake_crm)
    admin = await users.create("super_admin")
    await save_settings(server, op.settings(), admin.id)
    return op


def new_worker(server: RunningServer, **overrides: object) -> OutboxWorker:
    """The service's own delivery handlers in a worker with test-sized timings."""
    config = fast_config(server.config, **overrides)
    return OutboxWorker(server.db, config, server.worker_handlers(), name="e2e")


@pytest.fixture
async def worker(server: RunningServer) -> AsyncIterator[RunningWorker]:
    """A worker running beside the server, as `controlcenter serve` runs one in its lifespan."""
    outbox = new_worker(server, outbox_concurrency=16)
    running = RunningWorker(outbox, asyncio.create_task(outbox.run()))
    yield running
    await running.stop()
