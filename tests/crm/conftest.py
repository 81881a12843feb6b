"""A CRM transport and an operator-style client against the fake, per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from controlcenter.crm.client import CrmClient
from controlcenter.crm.transport import CrmTransport, RetryPolicy
from tests.fakes.crm import FakeCrm

FAST = RetryPolicy(max_retries=2, backoff_base_s=0.01, max_wait_s=1.0)


@pytest.fixture
async def transport(fake_crm: FakeCrm) -> AsyncIterator[CrmTransport]:
    crm = CrmTransport(fake_crm.url, timeout_s=2.0, retry=FAST)
    yield crm
    await crm.aclose()


@dataclass
class Location:
    id: str
    token: str
    client: CrmClient


@pytest.fixture
def location(fake_crm: FakeCrm, transport: CrmTransport) -> Location:
    """A location with a private integration token, and a client bound to it."""
    loc = fake_crm.add_location()
    token = fake_crm.private_token(loc["id"])
    return Location(loc["id"], token, CrmClient(transport, token=token, location_id=loc["id"]))
