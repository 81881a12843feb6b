"""Every built-in CRM tool has its own title, the titles name no tool that is gone, and a
broker reads them for the tools they have (`GET /tools`)."""

from __future__ import annotations

import httpx

from controlcenter.accounts.users import UserChanges, update_user
from controlcenter.auth.models import SUPER_ADMIN, UserRecord
from controlcenter.crm.tools import crm_tools
from controlcenter.crm.tools.titles import TITLES
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import writing

TOOLS = "/api/v1/control-center/tools"


def test_every_tool_has_a_title_of_its_own() -> None:
    tools = crm_tools()
    assert {tool.name for tool in tools} == set(TITLES)
    titles = [tool.title for tool in tools]
    assert all(titles) and len(set(titles)) == len(titles)
    assert all(title[0].isupper() and len(title) <= 40 for title in TITLES.values())


async def test_a_broker_reads_the_titles_of_the_tools_they_have(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    broker = await users.create()
    unlinked = await client.get(TOOLS, headers=broker.headers)
    assert unlinked.status_code == 200
    assert not {tool["name"] for tool in unlinked.json()["tools"]} & set(TITLES)
    # Linked as an administrator links it, so the broker's known credential learns it at once.
    changes = UserChanges(crm_location_id="location0001")
    await update_user(server.db, broker.id, changes, actor_role=SUPER_ADMIN)
    linked = (await client.get(TOOLS, headers=broker.headers)).json()["tools"]
    assert {"name": "contacts_get-contacts", "title": "Search contacts"} in linked
    assert (await client.get(TOOLS)).status_code == 401


async def test_a_blank_crm_location_is_no_link(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    """The chat's CRM client takes a blank location for none: so do the tools listed."""
    broker = await users.create()
    async with writing(server.db) as db:
        row = await db.get(UserRecord, broker.id)
        assert row is not None
        row.crm_location_id = "   "
    listed = await client.get(TOOLS, headers=broker.headers)
    assert listed.status_code == 200
    assert not {tool["name"] for tool in listed.json()["tools"]} & set(TITLES)
