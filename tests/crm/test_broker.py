"""The broker's own client: the linked location, the agency credential, nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from controlcenter.auth.models import UserRecord
from controlcenter.crm.broker import AGENCY_SETTINGS, broker_client
from controlcenter.crm.client import CrmClient
from controlcenter.crm.tools import NOT_CONNECTED, crm_tools
from controlcenter.tools.base import ToolContext, ToolError
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import reading, writing
from tests.fakes.crm import FakeCrm

TOOLS = {tool.name: tool for tool in crm_tools()}
AGENCY_KEY = "agency-oauth-token-very-secret-0001"


async def _agency(server: RunningServer) -> dict[str, str]:
    """The agency settings as a chat reads them."""
    return await server.settings.get_many(AGENCY_SETTINGS)


@pytest.fixture
async def broker_id(users: UserFactory) -> str:
    """One user per test (hashing a password is the slow part of making one)."""
    return (await users.create()).id


async def link(server: RunningServer, user_id: str, location_id: str | None) -> UserRecord:
    async with writing(server.db) as db:
        user = await db.get(UserRecord, user_id)
        assert user is not None
        user.crm_location_id = location_id
    async with reading(server.db) as db:
        loaded = await db.get(UserRecord, user_id)
    assert loaded is not None
    return loaded


async def configure(server: RunningServer, user_id: str, values: dict[str, str]) -> None:
    await server.db.run_write(server.settings.save, values, user_id=user_id)


@pytest.fixture
async def agency(server: RunningServer, broker_id: str, fake_crm: FakeCrm) -> dict[str, Any]:
    fake_crm.add_agency("company0000000000001", AGENCY_KEY)
    await configure(
        server, broker_id, {"crmAgencyApiKey": AGENCY_KEY, "crmAgencyId": "company0000000000001"}
    )
    first = fake_crm.add_location(company_id="company0000000000001")
    second = fake_crm.add_location(company_id="company0000000000001")
    return {"first": first["id"], "second": second["id"]}


async def call(tool: str, args: dict[str, Any], client: CrmClient | None) -> Any:
    return await TOOLS[tool].handler(args, ToolContext(user_id="u", crm=client))


async def test_client_is_bound_to_the_users_location(
    server: RunningServer, broker_id: str, fake_crm: FakeCrm, agency: dict[str, Any]
) -> None:
    mine = fake_crm.add_contact(agency["first"], email="mine@example.com")
    fake_crm.add_contact(agency["second"], email="theirs@example.com")
    user = await link(server, broker_id, agency["first"])
    client = await broker_client(await _agency(server), server.crm, user)
    assert client is not None and client.location_id == agency["first"]
    answer = await call("contacts_get-contacts", {}, client)
    assert [c["id"] for c in answer["contacts"]] == [mine["id"]]
    exchange = fake_crm.calls_to("POST", "/oauth/locationToken")
    assert len(exchange) == 1
    assert exchange[0].token_kind == "agency"
    assert exchange[0].body == {"companyId": "company0000000000001", "locationId": agency["first"]}
    listing = fake_crm.calls_to("POST", "/contacts/search")[0]
    assert listing.token_kind == "location" and listing.location_id == agency["first"]


async def test_another_brokers_contact_is_unreachable(
    server: RunningServer, broker_id: str, fake_crm: FakeCrm, agency: dict[str, Any]
) -> None:
    theirs = fake_crm.add_contact(agency["second"], email="theirs@example.com", tags=["vip"])
    user = await link(server, broker_id, agency["first"])
    client = await broker_client(await _agency(server), server.crm, user)
    for tool, args in (
        ("contacts_get-contact", {"contactId": theirs["id"]}),
        ("contacts_add-tags", {"contactId": theirs["id"], "tags": ["stolen"]}),
        ("contacts_get-all-notes", {"contactId": theirs["id"]}),
    ):
        with pytest.raises(ToolError, match="not in this user's CRM account"):
            await call(tool, args, client)
    stored = fake_crm.contact(theirs["id"])
    assert stored is not None and stored["tags"] == ["vip"]


async def test_location_token_is_cached_and_renewed_when_rejected(
    server: RunningServer, broker_id: str, fake_crm: FakeCrm, agency: dict[str, Any]
) -> None:
    user = await link(server, broker_id, agency["first"])
    client = await broker_client(await _agency(server), server.crm, user)
    await call("locations_get-location", {}, client)
    again = await broker_client(await _agency(server), server.crm, user)
    await call("locations_get-location", {}, again)
    assert len(fake_crm.calls_to("POST", "/oauth/locationToken")) == 1
    fake_crm.state.location_tokens.clear()  # the CRM revoked it
    answer = await call("locations_get-location", {}, again)
    assert answer["location"]["id"] == agency["first"]
    assert len(fake_crm.calls_to("POST", "/oauth/locationToken")) == 2


async def test_no_linked_location_means_no_client_and_a_clear_tool_error(
    server: RunningServer, broker_id: str, agency: dict[str, Any]
) -> None:
    user = await link(server, broker_id, None)
    client = await broker_client(await _agency(server), server.crm, user)
    assert client is None
    with pytest.raises(ToolError) as caught:
        await call("contacts_get-contacts", {}, client)
    assert str(caught.value) == NOT_CONNECTED


async def test_missing_agency_settings_mean_no_client(
    server: RunningServer, broker_id: str, fake_crm: FakeCrm
) -> None:
    location = fake_crm.add_location()
    user = await link(server, broker_id, location["id"])
    assert await broker_client(await _agency(server), server.crm, user) is None
    await configure(server, broker_id, {"crmAgencyApiKey": AGENCY_KEY})
    assert await broker_client(await _agency(server), server.crm, user) is None
    await configure(server, broker_id, {"crmAgencyApiKey": "", "crmAgencyId": "company"})
    assert await broker_client(await _agency(server), server.crm, user) is None


async def test_a_wrong_agency_key_is_reported_without_the_key(
    server: RunningServer, broker_id: str, fake_crm: FakeCrm, agency: dict[str, Any]
) -> None:
    wrong = "agency-key-that-does-not-exist-9999"
    await configure(server, broker_id, {"crmAgencyApiKey": wrong})
    user = await link(server, broker_id, agency["first"])
    client = await broker_client(await _agency(server), server.crm, user)
    with pytest.raises(ToolError) as caught:
        await call("contacts_get-contacts", {}, client)
    assert "refused the credentials" in str(caught.value)
    assert wrong not in str(caught.value) and AGENCY_KEY not in str(caught.value)
    assert wrong not in repr(client)


async def test_a_location_outside_the_agency_is_refused(
    server: RunningServer, broker_id: str, fake_crm: FakeCrm, agency: dict[str, Any]
) -> None:
    foreign = fake_crm.add_location(company_id="another-company-00001")
    user = await link(server, broker_id, foreign["id"])
    client = await broker_client(await _agency(server), server.crm, user)
    with pytest.raises(ToolError, match="The CRM refused the request: Location not found"):
        await call("locations_get-location", {}, client)


async def test_a_burst_of_calls_makes_one_token_exchange(
    server: RunningServer, broker_id: str, fake_crm: FakeCrm, agency: dict[str, Any]
) -> None:
    import asyncio

    user = await link(server, broker_id, agency["first"])
    client = await broker_client(await _agency(server), server.crm, user)
    await asyncio.gather(*(call("locations_get-location", {}, client) for _ in range(5)))
    assert len(fake_crm.calls_to("POST", "/oauth/locationToken")) == 1
