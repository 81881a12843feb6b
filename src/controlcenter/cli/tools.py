"""`controlcenter tools list|call`: the model's tools, seen and run from a shell.

An operator checks a broker's CRM connection (or the MCP server) without a chat: `list` shows
what the model is offered, through the router's own offering path (order, cut, names and
schemas as a provider receives them); `call` runs one tool as a user exactly as a chat turn
does (the same toolbox, argument checks and the user's own CRM client).

Exit status: 0 when the tool succeeded, 1 when it answered an error (printed as `{"error"}`),
2 for a mistake in the command itself (unknown user or tool, arguments that are not a JSON
object).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from controlcenter.llm.types import ToolInvocation

if TYPE_CHECKING:  # the service's components load only when a command runs
    from controlcenter.chat.service import ChatParts
    from controlcenter.tools.router import Toolbox

app = typer.Typer(no_args_is_help=True, help="The tools offered to the model.")

T = TypeVar("T")
USAGE = 2


class UsageError(Exception):
    """A mistake in the command line, said as `error: ...` with exit status 2."""


@dataclass(frozen=True)
class Offered:
    name: str  # as the provider sees it
    original: str  # the tool's own name (differs when it had to be made provider-safe)
    source: str  # "crm" (the built-in catalogue) or "mcp"
    description: str
    schema: dict[str, Any]  # as offered


def _run(work: Callable[[ChatParts], Awaitable[T]]) -> T:
    """Migrate, then run `work` with the service's own components, closed afterwards."""
    from controlcenter.admin_settings.store import SettingsStore
    from controlcenter.app import build_chat_parts, build_mcp, close_chat_parts, open_database
    from controlcenter.cli.support import opened_config
    from controlcenter.db.migrate import upgrade

    config = opened_config()  # logs on stderr: stdout is the answer
    upgrade(config.database_url)

    async def run() -> T:
        db = open_database(config)
        settings = SettingsStore(db, config.fernet_key)
        chat = build_chat_parts(config, db, settings, build_mcp(config, db, settings))
        try:
            return await work(chat)  # the parts a chat uses, as a chat uses them
        finally:
            await close_chat_parts(chat)
            await db.dispose()

    try:
        return asyncio.run(run())
    except UsageError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(USAGE) from exc


def _offered(toolbox: Toolbox) -> list[Offered]:
    """Per tool the toolbox offers, its own name and where it comes from: an MCP server's tool
    carries its server as its origin, the built-in catalogue's carries none."""
    offered = []
    for spec in toolbox.specs:
        tool = toolbox.tool(spec.name)
        original = tool.name if tool is not None else spec.name
        source = "mcp" if tool is not None and tool.origin else "crm"
        offered.append(Offered(spec.name, original, source, spec.description, spec.input_schema))
    return offered


def _find(offered: Sequence[Offered], name: str) -> Offered:
    """By the offered name, or by the tool's own name when the provider sees another."""
    for entry in offered:
        if entry.name == name:
            return entry
    for entry in offered:
        if entry.original == name:
            return entry
    raise UsageError(f"no tool named {name!r} is offered; see `controlcenter tools list`")


@app.command("list")
def tools_list(
    as_json: Annotated[
        bool,
        typer.Option("--json", help="A JSON list of {name, source, description, inputSchema}."),
    ] = False,
) -> None:
    """The tools offered to the model, in the order it sees them."""

    async def work(parts: ChatParts) -> list[Offered]:
        from controlcenter.chat.service import CHAT_SETTINGS

        settings = await parts.settings.get_many(CHAT_SETTINGS)
        return _offered(await parts.tools.toolbox(settings))

    offered = _run(work)
    if as_json:
        listing = [
            {
                "name": entry.name,
                "source": entry.source,
                "description": entry.description,
                "inputSchema": entry.schema,
            }
            for entry in offered
        ]
        typer.echo(json.dumps(listing, ensure_ascii=False, indent=2))
        return
    width = max((len(entry.name) for entry in offered), default=0)
    for entry in offered:
        summary = entry.description.split(". ")[0].rstrip(".")
        typer.echo(f"{entry.name:<{width}}  {entry.source:<3}  {summary}")
    typer.echo(f"{len(offered)} tools")


@app.command("call")
def tools_call(
    name: Annotated[str, typer.Argument(help="The tool, as `tools list` shows it.")],
    email: Annotated[str, typer.Option(help="The user the tool acts for.")],
    args: Annotated[str, typer.Option("--args", help="The arguments, a JSON object.")] = "{}",
) -> None:
    """Run one tool as a user, exactly as a chat would; print its result or {error} as JSON."""
    try:
        arguments = json.loads(args)
    except ValueError as exc:
        typer.echo(f"error: --args is not valid JSON: {exc}", err=True)
        raise typer.Exit(USAGE) from exc
    if not isinstance(arguments, dict):
        typer.echo('error: --args must be a JSON object, e.g. \'{"query": "dana"}\'', err=True)
        raise typer.Exit(USAGE)

    async def work(parts: ChatParts) -> dict[str, Any]:
        from controlcenter.auth.service import get_user_by_email
        from controlcenter.chat.context import ChatContext
        from controlcenter.chat.service import CHAT_SETTINGS

        user = await parts.db.run_read(get_user_by_email, email)
        if user is None:
            raise UsageError(f"no user with e-mail {email}")
        # The chat's own context: the same settings, the user's CRM location for the MCP
        # servers whose headers name it, and the user's CRM client.
        settings = await parts.settings.get_many(CHAT_SETTINGS)
        toolbox, context = await ChatContext(settings, parts.crm, parts.tools).toolbox(user)
        entry = _find(_offered(toolbox), name)
        result = await toolbox.execute(ToolInvocation("cli", entry.name, arguments), context)
        return {"result": result.result} if result.success else {"error": result.error or ""}

    answer = _run(work)
    if "error" in answer:
        typer.echo(json.dumps({"error": answer["error"]}, ensure_ascii=False, indent=2))
        raise typer.Exit(1)
    typer.echo(json.dumps(answer["result"], ensure_ascii=False, indent=2, default=str))
