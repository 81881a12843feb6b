"""`controlcenter tools list|call` through the installed entry point, against the fake CRM."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from cryptography.fernet import Fernet
from sqlalchemy.orm import Session

from controlcenter.admin_settings.store import SettingsStore
from controlcenter.auth.passwords import hash_password_off_loop
from controlcenter.auth.service import create_user, get_user_by_email
from controlcenter.crm.tools import NOT_CONNECTED, crm_tools
from controlcenter.db import Database
from controlcenter.db.migrate import upgrade
from controlcenter.tools.mcp.store import McpServerStore
from controlcenter.tools.router import StaticSource, ToolRouter
from tests.cli.conftest import Cli
from tests.fakes.crm import FakeCrm
from tests.fakes.highlevel_mcp import FakeHighLevelMcp, create_highlevel
from tests.fakes.mcp_server import FakeMcp

pytestmark = pytest.mark.timeout(600)

EMAIL = "dana.broker@example.com"


@dataclass
class ToolsCli(Cli):
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, **self.extra}


@dataclass
class Setup:
    cli: ToolsCli
    location: str
    dana: dict[str, Any]


def prepare(cli: ToolsCli, location: str, settings: dict[str, str]) -> None:
    """The accounts and CRM settings an administrator would have made (`users create`,
    `users set-crm` and the settings page, each tested on its own elsewhere)."""

    async def work() -> None:
        database = Database(cli.env["DATABASE_URL"])
        try:
            store = SettingsStore(database, cli.extra["SETTINGS_ENCRYPTION_KEY"])
            password_hash = await hash_password_off_loop("x" * 12)

            def accounts(session: Session) -> None:
                admin = create_user(session, email="boss@example.com", password_hash=password_hash)
                broker = create_user(session, email=EMAIL, password_hash=password_hash)
                broker.crm_location_id = location
                create_user(session, email="unlinked@example.com", password_hash=password_hash)
                store.save(session, settings, admin.id)

            await database.run_write(accounts)
        finally:
            await database.dispose()

    asyncio.run(work())


@pytest.fixture
def setup(cli: Cli, fake_crm: FakeCrm) -> Setup:
    tools_cli = ToolsCli(
        workdir=cli.workdir,
        db_path=cli.db_path,
        extra={
            "SETTINGS_ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "CRM_BASE_URL": fake_crm.url,
            "CRM_MAX_RETRIES": "0",
        },
    )
    agency = fake_crm.add_agency()
    location = fake_crm.add_location(company_id=fake_crm.company_of(agency))["id"]
    dana = fake_crm.add_contact(
        location, firstName="Dana", lastName="Whitfield", email="dana@northpier.example"
    )
    fake_crm.add_contact(location, firstName="Omar", email="omar@reyescap.example")
    # In this process: `db upgrade` through the entry point is tested on its own
    # (tests/cli/test_commands.py), and a process per test cost seconds of imports.
    upgrade(tools_cli.env["DATABASE_URL"])
    prepare(
        tools_cli,
        location,
        {"crmAgencyApiKey": agency, "crmAgencyId": fake_crm.company_of(agency)},
    )
    return Setup(tools_cli, location, dana)


def test_tools_list_shows_what_the_model_is_offered(setup: Setup) -> None:
    listed = setup.cli.run("tools", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    offered = json.loads(listed.stdout)
    specs = asyncio.run(ToolRouter([StaticSource(crm_tools())]).toolbox()).specs
    assert [tool["name"] for tool in offered] == [spec.name for spec in specs]
    assert len(offered) == 31
    for tool, spec in zip(offered, specs, strict=True):
        assert tool == {
            "name": spec.name,
            "source": "crm",
            "description": spec.description,
            "inputSchema": spec.input_schema,
        }
    text = setup.cli.run("tools", "list")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[-1] == "31 tools"
    assert lines[0].split()[:2] == ["contacts_get-contacts", "crm"]


def test_tools_call_runs_the_tool_as_the_user(setup: Setup, fake_crm: FakeCrm) -> None:
    called = setup.cli.run(
        "tools", "call", "contacts_get-contacts", "--email", EMAIL, "--args", '{"query": "dana"}'
    )
    assert called.returncode == 0, called.stderr
    answer = json.loads(called.stdout)
    assert [c["id"] for c in answer["contacts"]] == [setup.dana["id"]] and answer["total"] == 1
    [search] = fake_crm.calls_to("POST", "/contacts/search")
    assert (search.token_kind, search.location_id, search.status) == (
        "location",
        setup.location,
        200,
    )


def test_tools_call_prints_a_tool_error_and_exits_1(setup: Setup) -> None:
    missing = setup.cli.run(
        "tools", "call", "contacts_get-contact", "--email", EMAIL, "--args", '{"contactId": "gone"}'
    )
    assert missing.returncode == 1
    assert json.loads(missing.stdout) == {"error": "Contact not found."}
    invalid = setup.cli.run(
        "tools", "call", "contacts_get-contacts", "--email", EMAIL, "--args", '{"limit": 0}'
    )
    assert invalid.returncode == 1
    assert json.loads(invalid.stdout)["error"].startswith("Invalid arguments: 0 is less than")
    unlinked = setup.cli.run(
        "tools", "call", "locations_get-location", "--email", "unlinked@example.com"
    )
    assert unlinked.returncode == 1
    assert json.loads(unlinked.stdout) == {"error": NOT_CONNECTED}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nobody@example.com", "contacts_get-contacts", "{}"), "no user with e-mail"),
        ((EMAIL, "contacts_no-such-tool", "{}"), "no tool named 'contacts_no-such-tool'"),
        ((EMAIL, "contacts_get-contacts", "{query"), "--args is not valid JSON"),
        ((EMAIL, "contacts_get-contacts", '["dana"]'), "--args must be a JSON object"),
    ],
)
def test_tools_call_mistakes_are_usage_errors(
    setup: Setup, fake_crm: FakeCrm, args: tuple[str, str, str], message: str
) -> None:
    email, name, arguments = args
    before = len(fake_crm.calls)
    result = setup.cli.run("tools", "call", name, "--email", email, "--args", arguments)
    assert result.returncode == 2
    assert result.stdout == ""
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last
    assert len(fake_crm.calls) == before  # nothing reached the CRM


def store_highlevel(cli: ToolsCli, fake: FakeHighLevelMcp, mcp_server_url: str) -> None:
    """HighLevel's MCP server as an operator stores it (`create_highlevel`), and
    `mcpServerUrl`'s server."""

    async def work() -> None:
        database = Database(cli.env["DATABASE_URL"])
        try:
            store = SettingsStore(database, cli.extra["SETTINGS_ENCRYPTION_KEY"])
            servers = McpServerStore(database, store.cipher, ttl_s=0)
            admin = await database.run_read(get_user_by_email, "boss@example.com")
            assert admin is not None
            await database.run_write(store.save, {"mcpServerUrl": mcp_server_url}, admin.id)
            await create_highlevel(servers, fake, admin.id)
        finally:
            await database.dispose()

    asyncio.run(work())


def test_an_mcp_servers_tools_are_listed_as_mcp_and_called_with_the_users_location(
    setup: Setup, fake_highlevel: FakeHighLevelMcp, fake_mcp: FakeMcp
) -> None:
    store_highlevel(setup.cli, fake_highlevel, fake_mcp.url)
    # Listed for no broker: a server whose headers need a location offers nothing then.
    listed = json.loads(setup.cli.run("tools", "list", "--json").stdout)
    sources = {tool["name"]: tool["source"] for tool in listed}
    assert sources["contacts_get-contacts"] == "crm"
    mcp_names = {name for name, source in sources.items() if source == "mcp"}
    assert mcp_names and not any(name.startswith("HighLevel_") for name in mcp_names)
    called = setup.cli.run(
        "tools", "call", "HighLevel_locations_get-location", "--email", EMAIL, "--args", "{}"
    )
    assert called.returncode == 0, called.stderr
    [(name, location, _)] = fake_highlevel.calls
    assert (name, location) == ("locations_get-location", setup.location)
