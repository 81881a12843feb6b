"""`controlcenter mcp conformance-client URL`: the service's MCP client as the client under test
of the MCP conformance suite (`@modelcontextprotocol/conformance`, `docs/mcp.md`).

The suite starts a scenario's server, runs the command with the server's address appended,
the scenario's name in `MCP_CONFORMANCE_SCENARIO` and, for a scenario that hands the client
credentials, a JSON object in `MCP_CONFORMANCE_CONTEXT`; then it judges what its servers saw.
The command configures the scenario's server as an operator stores one (its address, and OAuth
client credentials when the context holds `client_id` and `client_secret`, with `issuer` when it
names one) and does what a chat does with it: the same `McpSource` (OAuth provider, session,
transport, connection pool), which connects, lists the tools and calls the ones the scenario
asks for. Each result is printed on stdout as one JSON line `{"tool", "result"}`.

Exit status: 0 when every step succeeded, 1 when one failed (`error: ...` on stderr), 2 for a
scenario the command does not know or a context it cannot read.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from controlcenter.common.logs import configure_logging
from controlcenter.config import Config

if TYPE_CHECKING:
    from controlcenter.tools.mcp.server import McpServer, OAuthClient
    from controlcenter.tools.mcp.store import StoredServer

app = typer.Typer(no_args_is_help=True, help="The MCP client.")

USAGE = 2
SERVER_NAME = "conformance"  # the scenario's server, as the operator would name it

# What each client scenario of the suite asks of a client once connected and its tools listed:
# the tools to call and their arguments. The scenarios that do not apply to this client
# (authorization flows it does not run, elicitation) are listed with the reason in docs/mcp.md.
SCENARIOS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "initialize": (),
    "tools_call": (("add_numbers", {"a": 2, "b": 3}),),
    "sse-retry": (("test_reconnection", {}),),
    "auth/client-credentials-basic": (("test-tool", {}),),
    "auth/pre-registration": (("test-tool", {}),),
}


@app.command("conformance-client")
def conformance_client(
    url: Annotated[str, typer.Argument(help="The scenario's MCP server (the suite appends it).")],
    scenario: Annotated[
        str,
        typer.Option(
            envvar="MCP_CONFORMANCE_SCENARIO",
            help="The suite's client scenario: " + ", ".join(SCENARIOS) + ".",
        ),
    ],
    context: Annotated[
        str,
        typer.Option(
            envvar="MCP_CONFORMANCE_CONTEXT",
            help="The scenario's context (JSON): OAuth client credentials in `client_id`, "
            "`client_secret` and optionally `issuer`.",
        ),
    ] = "",
) -> None:
    """Run one conformance scenario with the service's MCP client: connect, list the tools,
    call the scenario's; print each result as a JSON line."""
    calls = SCENARIOS.get(scenario)
    if calls is None:
        typer.echo(f"error: unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}", err=True)
        raise typer.Exit(USAGE)
    try:
        oauth = _oauth_client(context)
    except ValueError as exc:
        typer.echo(f"error: the scenario's context cannot be read: {exc}", err=True)
        raise typer.Exit(USAGE) from exc
    config = Config()
    configure_logging(config.log_level, config.log_format)  # stderr: stdout is the answer
    try:
        asyncio.run(_run(config, url, oauth, calls))
    except Exception as exc:
        from controlcenter.tools.base import ToolError
        from controlcenter.tools.mcp.failures import describe_failure
        from controlcenter.tools.mcp.server import McpServer

        # The scenario's own credentials are removed from the server's words like a stored
        # server's are.
        secrets = McpServer(name=SERVER_NAME, url=url, oauth=oauth).secrets()
        reason = str(exc) if isinstance(exc, ToolError) else describe_failure(exc, secrets)
        typer.echo(f"error: {reason}", err=True)
        raise typer.Exit(1) from exc


def _oauth_client(context: str) -> OAuthClient | None:
    """The OAuth client credentials the context hands over, None when it hands none.

    Raises ValueError (never quoting the secret) when it is not a JSON object of strings."""
    from controlcenter.tools.mcp.server import OAuthClient

    if not context.strip():
        return None
    try:
        values = json.loads(context)
    except json.JSONDecodeError as exc:
        raise ValueError("it is not JSON") from exc
    if not isinstance(values, dict):
        raise ValueError("it is not a JSON object")
    fields = {key: values.get(key, "") for key in ("client_id", "client_secret", "issuer")}
    for key, value in fields.items():
        if not isinstance(value, str):
            raise ValueError(f"{key} is not a string")
    if not fields["client_id"] and not fields["client_secret"]:
        return None
    return OAuthClient(fields["client_id"], fields["client_secret"], fields["issuer"])


class _Stored:
    """The scenario's server as the only stored server (the store's protocol, no database)."""

    def __init__(self, server: McpServer) -> None:
        self.server = server

    async def enabled(self) -> Sequence[McpServer]:
        return (self.server,)

    async def all(self) -> Sequence[StoredServer]:
        from datetime import UTC, datetime

        from controlcenter.tools.mcp.store import StoredServer

        now = datetime.now(UTC)
        return (StoredServer(SERVER_NAME, True, self.server, now, now),)


async def _run(
    config: Config,
    url: str,
    oauth: OAuthClient | None,
    calls: tuple[tuple[str, dict[str, Any]], ...],
) -> None:
    from controlcenter.tools.base import Settings, ToolContext, ToolError
    from controlcenter.tools.mcp.server import McpServer
    from controlcenter.tools.mcp.source import McpSource

    # The settings a chat would read, without `mcpServerUrl`: the scenario's server is stored.
    settings: Settings = {}
    server = McpServer(name=SERVER_NAME, url=url, oauth=oauth)

    async def no_setting_server() -> str:
        return ""

    source = McpSource(
        no_setting_server,
        ttl_s=config.mcp_cache_ttl_s,
        timeout_s=config.mcp_timeout_s,
        stored=_Stored(server),
    )
    try:
        [configured] = await source.servers(settings)
        tools = {tool.name: tool for tool in await source.list_now(configured, None)}
        context = ToolContext(user_id="conformance", crm=None, settings=settings)
        for name, arguments in calls:
            tool = tools.get(name)
            if tool is None:
                raise ToolError(f"the server lists no tool {name!r}")
            result = await tool.handler(arguments, context)
            line = {"tool": name, "result": result}
            typer.echo(json.dumps(line, ensure_ascii=False, default=str))
    finally:
        await source.aclose()
