"""What the ledger's tests share: a broker linked to a location at the fake CRM, one provider
scripted to make the writes, and the ledger's API as the broker calls it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.chat.helpers import Llm, stream_chat
from tests.conftest import AppUser, UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import FakeAnthropic, Reply, ToolUse
from tests.integration.conftest import Agency
from tests.integration.conftest import agency as agency

ACTIVITY = "/api/v1/control-center/activity"
ADMIN_ACTIVITY = "/api/v1/admin/activity"


@pytest.fixture
def llm(fake_anthropic: FakeAnthropic) -> Iterator[Llm]:
    """One provider: the ledger lies below the provider's loop, which tests/chat runs on both."""
    current = Llm("provider_a", fake_anthropic, "providerAApiKey")
    yield current
    assert current.fake.invalid == []


@dataclass
class Desk:
    """A broker at his location, and what the tests do through the API as him."""

    client: httpx.AsyncClient
    llm: Llm
    crm: FakeCrm
    location: str
    broker: AppUser

    async def chat(self, *calls: tuple[str, dict[str, Any]], message: str = "Do it") -> str:
        """One chat turn in which the model makes `calls` (tool, arguments) in one reply;
        the conversation's id."""
        uses = [ToolUse(name, args, id=f"toolu_{n}") for n, (name, args) in enumerate(calls)]
        self.llm.fake.script(Reply(tool_uses=uses), Reply(text="Done."))
        _, events = await stream_chat(
            self.client, self.broker, {"message": message, "provider": self.llm.name}
        )
        assert events[-1]["type"] == "message_complete", events[-1]
        return str(events[0]["conversationId"])

    async def entries(self, user: AppUser | None = None, **query: str) -> list[dict[str, Any]]:
        got = await self.client.get(ACTIVITY, params=query, headers=(user or self.broker).headers)
        assert got.status_code == 200, got.text
        entries: list[dict[str, Any]] = got.json()["entries"]
        return entries

    async def undo(self, entry_id: str, user: AppUser | None = None) -> httpx.Response:
        headers = (user or self.broker).headers
        return await self.client.post(f"{ACTIVITY}/{entry_id}/undo", headers=headers)


@pytest.fixture
async def desk(
    client: httpx.AsyncClient, llm: Llm, users: UserFactory, agency: Agency, fake_crm: FakeCrm
) -> Desk:
    location = agency.location()
    broker = await agency.broker(users, llm, location)
    return Desk(client, llm, fake_crm, location, broker)
