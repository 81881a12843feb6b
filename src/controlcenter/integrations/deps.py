"""Route dependencies of the connection tests: the app's shared clients
(`app.state.chat`, `app.state.mcp`)."""

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request

from controlcenter.config import Config
from controlcenter.integrations.service import CRM, Connections
from controlcenter.providers.base import PROVIDER_A, PROVIDER_B


async def get_connections(request: Request) -> Connections:
    parts = request.app.state.chat
    return Connections(
        settings=parts.settings,
        providers=parts.providers,
        crm=parts.crm,
        mcp=request.app.state.mcp,
        mcp_timeout_s=request.app.state.config.mcp_timeout_s,
        hosts=hosts_of(request.app.state.config),
    )


def hosts_of(config: Config) -> dict[str, str]:
    """The host of each address a test calls (`host:port` when a port is given)."""
    urls = {
        PROVIDER_A: config.provider_a_base_url,
        PROVIDER_B: config.provider_b_base_url,
        CRM: config.crm_base_url,
    }
    return {name: urlsplit(url).netloc.rsplit("@", 1)[-1] for name, url in urls.items()}


ConnectionsDep = Annotated[Connections, Depends(get_connections)]
