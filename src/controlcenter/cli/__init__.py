"""The `controlcenter` command (docs/reference.md, "Command line")."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from controlcenter.auth.models import UserRecord
from controlcenter.cli import database as where
from controlcenter.cli.accounts import register as register_account_commands
from controlcenter.cli.mcp import app as mcp_app
from controlcenter.cli.metrics_dir import shared_metrics
from controlcenter.cli.proxies import proxy_options
from controlcenter.cli.support import opened_config, with_db
from controlcenter.cli.tools import app as tools_app
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.db.migrate import upgrade

FIRST_USER = (
    "python3 -m uv run controlcenter users create --email you@example.com --role super_admin"
)

# How long uvicorn's supervisor waits for a new worker process to answer. Its default, 5 s,
# is shorter than importing the app takes on a busy small machine (tens of seconds on two
# loaded cores): the supervisor then kills every worker while it starts, and serves nothing.
WORKER_START_S = 120

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Control Center service.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
users_app = typer.Typer(no_args_is_help=True, help="User accounts.")
tokens_app = typer.Typer(no_args_is_help=True, help="API tokens (app passwords).")
app.add_typer(db_app, name="db")
app.add_typer(users_app, name="users")
app.add_typer(tokens_app, name="tokens")
app.add_typer(tools_app, name="tools")
app.add_typer(mcp_app, name="mcp")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply the migrations (creates the database when there is none)."""
    config = opened_config(create=True)
    upgrade(config.database_url)
    typer.echo("database is up to date")


@db_app.command("backup")
def db_backup(
    path: Annotated[Path, typer.Argument(help="the copy to write, or a folder to write it in")],
) -> None:
    """Copy the live database consistently (SQLite: safe while `serve` runs); into a folder,
    as a file named for the moment."""
    written = where.backup(opened_config(), path)
    typer.echo(f"backed up to {written}")


@db_app.command("restore")
def db_restore(path: Annotated[Path, typer.Argument(help="a copy made by `db backup`")]) -> None:
    """Replace the database with a copy (SQLite; refused while a `serve` uses it)."""
    where.restore(opened_config(create=True), path)
    typer.echo(f"restored from {path}")


def cpu_count() -> int:
    """The cores this process may run on (a container's CPU set, not the host's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _count_users(session: Session) -> int:
    return int(session.scalar(select(func.count()).select_from(UserRecord)) or 0)


@app.command()
def serve(
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    workers: Annotated[
        int | None, typer.Option(min=1, help="processes to run  [default: the CPU count]")
    ] = None,
) -> None:
    """Apply migrations, then serve the API and run the outbox worker in each process."""
    import uvicorn

    from controlcenter.cli.open_files import raise_open_files_limit
    from controlcenter.common.logs import get_logger
    from controlcenter.web.middleware.client_timeouts import SERVE_PROTOCOL

    config = Config()

    async def count_users(database: Database) -> int:
        return await database.run_read(_count_users)

    if with_db(count_users, quiet_migrations=False, create=True) == 0:
        first_user = where.command_prefix(config) + FIRST_USER
        if config.log_format == "json":  # every line JSON: the hint is a record too
            get_logger(__name__).warning(
                "No users yet: create the first super administrator", command=first_user
            )
        else:
            typer.echo(
                f"No users yet. Create the first super administrator with:\n  {first_user}\n"
                "(it prints a generated password; add --password-stdin to choose one)"
            )
    processes = workers or cpu_count()
    raise_open_files_limit()
    with shared_metrics(processes), where.in_use(config):
        uvicorn.run(
            "controlcenter.asgi:app",
            host=host,
            port=port,
            workers=processes,
            log_level=config.log_level.lower(),
            log_config=None,  # uvicorn's records go through our logging (logs.py)
            # The service logs each request itself, with its duration and request id.
            access_log=False,
            **proxy_options(),
            # The 431 header limit, before the parser holds more, and the slow clients' timeouts.
            http=SERVE_PROTOCOL,
            timeout_worker_healthcheck=WORKER_START_S,
        )


@app.command()
def worker() -> None:
    """Run only the outbox worker, until SIGTERM or Ctrl-C (then it stops gracefully)."""
    from controlcenter.admin_settings.store import SettingsStore
    from controlcenter.app import WORKER_WAKES, open_database, worker_handlers
    from controlcenter.crm.transport import CrmTransport
    from controlcenter.outbox.runtime import run_until_signalled

    config = opened_config()
    upgrade(config.database_url)

    async def run() -> None:
        db = open_database(config)
        await db.changes.start()
        crm = CrmTransport.from_config(config)
        handlers = worker_handlers(config, db, SettingsStore(db, config.fernet_key), crm)
        try:
            await run_until_signalled(db, config, handlers, wake_on=WORKER_WAKES)
        finally:
            await crm.aclose()
            await db.dispose()

    with where.in_use(config):
        asyncio.run(run())


register_account_commands(users_app, tokens_app)


def main() -> None:
    """The command; a configuration that cannot be used ends in one line per problem, naming
    the variable, not in a traceback."""
    try:
        app()
    except ValidationError as exc:
        for problem in exc.errors():
            variable = "_".join(str(part) for part in problem["loc"]).upper() or "configuration"
            message = str(problem["msg"]).removeprefix("Value error, ")
            typer.echo(f"error: {variable}: {message}", err=True)
        raise SystemExit(1) from None
    except (ConnectionError, TimeoutError, socket.gaierror, SQLAlchemyError) as exc:
        # The database cannot be reached or opened (a host that does not answer, a name that
        # does not resolve, a file SQLite cannot open): its reason in one line.
        typer.echo(f"error: the database could not be used: {_first_line(exc)}", err=True)
        raise SystemExit(1) from None
    except OSError as exc:  # a file or folder the command cannot use
        typer.echo(f"error: {_first_line(exc)}", err=True)
        raise SystemExit(1) from None


def _first_line(exc: BaseException) -> str:
    """The error's own reason (a driver's, under SQLAlchemy's wrapper), first line only."""
    text = str(getattr(exc, "orig", None) or exc)
    return text.splitlines()[0] if text else type(exc).__name__
