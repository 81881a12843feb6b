"""Route dependencies of the MCP servers' API: the source of their tools, built once by the
app when it starts (`app.state.mcp`, `app.py`), and the store it reads them from."""

from typing import Annotated

from fastapi import Depends, Request

from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.mcp.store import McpServerStore


async def get_mcp_source(request: Request) -> McpSource:
    source: McpSource = request.app.state.mcp
    return source


async def get_mcp_store(request: Request) -> McpServerStore:
    store = (await get_mcp_source(request)).stored
    if not isinstance(store, McpServerStore):  # the app builds the source with its store
        raise RuntimeError("the MCP source has no store")
    return store


McpSourceDep = Annotated[McpSource, Depends(get_mcp_source)]
McpStoreDep = Annotated[McpServerStore, Depends(get_mcp_store)]
