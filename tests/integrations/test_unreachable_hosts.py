"""A test whose call gets no answer names the host it could not reach (the service's own
configuration), never a bare "Connection error": the real SDK and CRM client, pointed at a
loopback port nothing listens on."""

from __future__ import annotations

import socket

from controlcenter.crm.transport import CrmTransport
from controlcenter.integrations.deps import hosts_of
from controlcenter.integrations.service import Connections
from controlcenter.providers.registry import build_providers, close_providers
from tests.chat.helpers import set_settings
from tests.conftest import RunningServer, UserFactory


def closed_port() -> int:
    """A loopback port nothing listens on (taken, then given back)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_the_host_that_did_not_answer_is_named(
    server: RunningServer, users: UserFactory
) -> None:
    port = closed_port()
    nowhere = f"http://127.0.0.1:{port}"
    config = server.config.model_copy(
        update={"provider_a_base_url": nowhere, "crm_base_url": nowhere, "crm_max_retries": 0}
    )
    admin = await users.create("super_admin")
    key = "sk-ant-unreachable-000000000000"
    token = "pit-" + "1" * 32
    await set_settings(
        server,
        {"providerAApiKey": key, "crmPrivateToken": token, "crmOwnerLocationId": "loc1"},
        admin,
    )
    providers = build_providers(config)
    crm = CrmTransport.from_config(config)
    connections = Connections(
        settings=server.settings,
        providers=providers,
        crm=crm,
        mcp=server.app.state.mcp,
        mcp_timeout_s=config.mcp_timeout_s,
        hosts=hosts_of(config),
    )
    try:
        for name in ("provider_a", "crm"):
            ok, detail = await connections.test(name)
            assert not ok
            assert detail.startswith(f"Could not reach 127.0.0.1:{port}: "), detail
            assert key not in detail and token not in detail
    finally:
        await crm.aclose()
        await close_providers(providers)
