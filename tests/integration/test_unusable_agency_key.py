"""An agency key that cannot travel in a header is a clear chat error naming the
setting, never a codec message from inside the HTTP client."""

from __future__ import annotations

import httpx

from tests.chat.helpers import Llm, stream_chat, types
from tests.conftest import UserFactory
from tests.fakes.crm import FakeCrm
from tests.integration.conftest import Agency
from tests.outbox.operator import save_settings


async def test_a_non_ascii_agency_key_is_a_configuration_error(
    client: httpx.AsyncClient, llm: Llm, users: UserFactory, agency: Agency, fake_crm: FakeCrm
) -> None:
    broker = await agency.broker(users, llm, agency.location())
    await save_settings(agency.server, {"crmAgencyApiKey": "agency-kéy-0001"}, broker.id)
    _, events = await stream_chat(client, broker, {"message": "Who?", "provider": llm.name})
    assert types(events) == ["message_start", "error"]
    assert events[-1] == {
        "type": "error",
        "error": "Configuration error: the setting crmAgencyApiKey cannot be used "
        "(a credential must be printable ASCII)",
    }
    assert llm.fake.requests == [] and fake_crm.calls == []
