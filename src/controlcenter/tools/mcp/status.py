"""Each configured MCP server's state as an operator checks it: listed now, not from the cache.

A server whose headers carry the broker's CRM location is checked with the operator's own
location (the setting `crmOwnerLocationId`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from controlcenter.admin_settings.names import (
    MCP_SERVER_URL,
    OWNER_LOCATION_ID,
    SECRET_NAMES,
    SettingName,
)
from controlcenter.tools.base import Settings, ToolError
from controlcenter.tools.mcp.failures import (
    CONNECT_FAILURES,
    describe_failure,
    innermost,
    known_secrets,
)
from controlcenter.tools.mcp.server import McpServer, NeedsLocationError
from controlcenter.tools.mcp.source import McpSource

# The settings `server_states` reads from the snapshot it is given: the secret ones are removed
# from every server's answer.
STATUS_SETTINGS: tuple[SettingName, ...] = (
    MCP_SERVER_URL,
    OWNER_LOCATION_ID,
    *sorted(SECRET_NAMES),
)
NONE_CONFIGURED = "mcpServerUrl is not set and no MCP server is configured"
NO_ISSUER = (
    "set oauthIssuer: without it the client secret goes to whichever authorization server "
    "the MCP server names"
)


@dataclass(frozen=True)
class ServerState:
    name: str
    state: Literal["working", "failing", "disabled"]
    tool_count: int
    ok: bool
    detail: str
    warning: str = ""

    def json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "toolCount": self.tool_count,
            "ok": self.ok,
            "detail": self.detail,
            "warning": self.warning,
        }


async def server_states(
    source: McpSource, settings: Settings, *, timeout_s: float
) -> list[ServerState]:
    """Every configured server, in the order the chat uses them (the setting's first, then the
    stored ones by name, disabled ones included), each listed within `timeout_s`, all at once.

    `settings`: a snapshot holding at least `STATUS_SETTINGS`. No answer carries a secret."""
    setting = await source.setting_server(settings)
    configured: list[tuple[McpServer, bool]] = [(setting, True)] if setting is not None else []
    if source.stored is not None:
        configured.extend((s.server, s.enabled) for s in await source.stored.all())
    location = settings.get(OWNER_LOCATION_ID, "").strip() or None
    return list(
        await asyncio.gather(
            *(
                _state(source, server, enabled, location, timeout_s, settings)
                for server, enabled in configured
            )
        )
    )


def summary(states: Sequence[ServerState]) -> tuple[bool, str]:
    """One `{ok, detail}` for all of them: ok when at least one is enabled and every enabled one
    works."""
    enabled = [s for s in states if s.state != "disabled"]
    if not enabled:
        return False, NONE_CONFIGURED
    detail = "; ".join(
        f"{s.name}: {s.detail}" + (f" (warning: {s.warning})" if s.warning else "") for s in states
    )
    return all(s.ok for s in enabled), detail


async def _state(
    source: McpSource,
    server: McpServer,
    enabled: bool,
    location: str | None,
    timeout_s: float,
    settings: Settings,
) -> ServerState:
    if not enabled:
        return ServerState(server.name, "disabled", 0, True, "disabled")
    try:
        async with asyncio.timeout(timeout_s):
            count = len(await source.list_now(server, location))
    except NeedsLocationError:
        detail = "its headers need a CRM location: set crmOwnerLocationId to check it"
        return ServerState(server.name, "failing", 0, False, detail)
    except ToolError as exc:
        return ServerState(server.name, "failing", 0, False, str(exc))
    except Exception as exc:
        detail = describe_failure(exc, known_secrets(server, settings))
        if isinstance(innermost(exc), (*CONNECT_FAILURES, TimeoutError)):
            # No answer came: the host that was called tells the operator where to look.
            detail = f"could not reach {_host(server)}: {detail}"
        return ServerState(server.name, "failing", 0, False, detail)
    return ServerState(server.name, "working", count, True, f"{count} tools", _warning(server))


def _host(server: McpServer) -> str:
    """The server's host and port, without the userinfo an old address may carry."""
    return urlsplit(server.url).netloc.rpartition("@")[2] or "the server"


def _warning(server: McpServer) -> str:
    if server.oauth is not None and not server.oauth.issuer:
        return NO_ISSUER
    return ""
