"""Route dependencies of the connection tests: the app's shared clients
(`app.state.chat`, `app.state.mcp`)."""

from typing import Annotated

from fastapi import Depends, Request

from controlcenter.integrations.service import Connections


async def get_connections(request: Request) -> Connections:
    parts = request.app.state.chat
    return Connections(
        settings=parts.settings,
        providers=parts.providers,
        crm=parts.crm,
        mcp=request.app.state.mcp,
        mcp_timeout_s=request.app.state.config.mcp_timeout_s,
    )


ConnectionsDep = Annotated[Connections, Depends(get_connections)]
