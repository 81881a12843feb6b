"""GET /providers: the providers a chat may choose, those whose key is set; never a key."""

from __future__ import annotations

import httpx

from tests.chat.helpers import set_settings
from tests.conftest import RunningServer, UserFactory

PROVIDERS = "/api/v1/control-center/providers"


async def test_only_providers_with_a_key_are_offered(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    broker, admin = await users.create(), await users.create("super_admin")
    none = await client.get(PROVIDERS, headers=broker.headers)
    assert (none.status_code, none.json()) == (200, {"providers": []})
    await set_settings(server, {"providerBApiKey": "sk-openai-key-000000000001"}, admin)
    only_b = await client.get(PROVIDERS, headers=broker.headers)
    assert only_b.json() == {"providers": ["provider_b"]}
    assert "sk-openai" not in only_b.text
    await set_settings(server, {"providerAApiKey": "sk-ant-key-0000000000000001"}, admin)
    both = await client.get(PROVIDERS, headers=broker.headers)
    assert both.json() == {"providers": ["provider_a", "provider_b"]}
    assert (await client.get(PROVIDERS)).status_code == 401
