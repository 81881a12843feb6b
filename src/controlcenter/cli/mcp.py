"""`controlcenter mcp conformance-client URL`: the service's MCP client as the client under test
of the MCP conformance suite (`@modelcontextprotocol/conformance`, `docs/mcp.md`).

The suite starts a scenario's server, runs the command with the server's address appended and
the scenario's name in `MCP_CONFORMANCE_SCENARIO`, and judges what the server saw. The command
does what the chat does with a server at the setting `mcpServerUrl`: the same `McpSource`
(session, transport, connection pool), which connects, lists the tools and calls the ones the
scenario asks for. Each result is printed on stdout as one JSON line `{"tool", "result"}`.

Exit status: 0 when every step succeeded, 1 when one failed (`error: ...` on stderr), 2 for a
scenario the command does not know.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer

from controlcenter.common.logs import configure_logging
from controlcenter.config import Config

app = typer.Typer(no_args_is_help=True, help="The MCP client.")

USAGE = 2

# What each client scenario of the suite asks of a client once connected and its tools listed:
# the tools to call and their arguments. The scenarios that do not apply to a tools client
# (authorization, elicitation) are listed with the reason in docs/mcp.md.
SCENARIOS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "initialize": (),
    "tools_call": (("add_numbers", {"a": 2, "b": 3}),),
    "sse-retry": (("test_reconnection", {}),),
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
) -> None:
    """Run one conformance scenario with the service's MCP client: connect, list the tools,
    call the scenario's; print each result as a JSON line."""
    calls = SCENARIOS.get(scenario)
    if calls is None:
        typer.echo(f"error: unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}", err=True)
        raise typer.Exit(USAGE)
    config = Config()
    configure_logging(config.log_level, config.log_format)  # stderr: stdout is the answer
    try:
        asyncio.run(_run(config, url, calls))
    except Exception as exc:
        from controlcenter.tools.base import ToolError
        from controlcenter.tools.mcp_source import describe_failure

        reason = str(exc) if isinstance(exc, ToolError) else describe_failure(exc)
        typer.echo(f"error: {reason}", err=True)
        raise typer.Exit(1) from exc


async def _run(config: Config, url: str, calls: tuple[tuple[str, dict[str, Any]], ...]) -> None:
    from controlcenter.admin_settings.names import MCP_SERVER_URL
    from controlcenter.tools.base import Settings, ToolContext, ToolError
    from controlcenter.tools.mcp_source import McpSource

    # The settings a chat would read, with the scenario's server as `mcpServerUrl`.
    settings: Settings = {MCP_SERVER_URL: url}

    async def server_url() -> str:
        return url

    source = McpSource(server_url, ttl_s=config.mcp_cache_ttl_s, timeout_s=config.mcp_timeout_s)
    try:
        server = await source.setting_server(settings)
        if server is None:
            raise ToolError("the server's address is empty")
        tools = {tool.name: tool for tool in await source.list_now(server, None)}
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
