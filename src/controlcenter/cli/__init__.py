"""The `controlcenter` command (CONTRACT section 7)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from sqlalchemy import func, select

from controlcenter.auth.models import ROLES, User
from controlcenter.auth.service import (
    UserExistsError,
    create_api_token,
    create_user,
    get_user_by_email,
)
from controlcenter.cli.tools import app as tools_app
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.db.migrate import upgrade

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Control Center service.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
users_app = typer.Typer(no_args_is_help=True, help="User accounts.")
tokens_app = typer.Typer(no_args_is_help=True, help="API tokens (app passwords).")
app.add_typer(db_app, name="db")
app.add_typer(users_app, name="users")
app.add_typer(tokens_app, name="tokens")
app.add_typer(tools_app, name="tools")

T = TypeVar("T")


def _with_db(work: Callable[[Database], Awaitable[T]]) -> T:
    """Migrate, then run `work` against the configured database."""
    config = Config()
    upgrade(config.database_url)

    async def run() -> T:
        database = Database(config.database_url)
        try:
            return await work(database)
        finally:
            await database.dispose()

    return asyncio.run(run())


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply the migrations."""
    upgrade(Config().database_url)
    typer.echo("database is up to date")


@app.command()
def serve(
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option()] = 8000,
    workers: Annotated[int, typer.Option(min=1)] = 1,
) -> None:
    """Apply migrations, then serve the API and run the outbox worker."""
    import uvicorn

    from controlcenter.common.logs import (
        configure_logging,  # only `serve` logs: keep the rest quick
    )
    from controlcenter.web.middleware.header_limit import PROTOCOL

    config = Config()
    configure_logging(config.log_level, config.log_format)

    async def count_users(database: Database) -> int:
        async with database.read() as db:
            return int(await db.scalar(select(func.count()).select_from(User)) or 0)

    if _with_db(count_users) == 0:
        typer.echo(
            "No users yet. Create the first super administrator with:\n"
            "  python3 -m uv run controlcenter users create"
            " --email you@example.com --role super_admin\n"
            "(it prints a generated password; add --password-stdin to choose one)"
        )
    uvicorn.run(
        "controlcenter.asgi:app",
        host=host,
        port=port,
        workers=workers,
        log_level=config.log_level.lower(),
        proxy_headers=True,
        http=PROTOCOL,  # the 431 header limit
    )


@app.command()
def worker() -> None:
    """Run only the outbox worker, until SIGTERM or Ctrl-C (then it stops gracefully)."""
    from controlcenter.app import build_services, close_services, worker_handlers
    from controlcenter.common.logs import configure_logging
    from controlcenter.outbox.runtime import run_until_signalled

    config = Config()
    configure_logging(config.log_level, config.log_format)
    upgrade(config.database_url)

    async def run() -> None:
        services = build_services(config)
        try:
            await run_until_signalled(services.db, config, worker_handlers(services))
        finally:
            await close_services(services)

    asyncio.run(run())


@users_app.command("create")
def users_create(
    email: Annotated[str, typer.Option()],
    name: Annotated[str, typer.Option()] = "",
    role: Annotated[str, typer.Option(help="user, admin or super_admin")] = "user",
    password_stdin: Annotated[bool, typer.Option("--password-stdin")] = False,
) -> None:
    """Create a user; prints a generated password when none is given."""
    import secrets

    if role not in ROLES:
        _fail(f"role must be one of {', '.join(ROLES)}")
    if "@" not in email:
        _fail("email must be an e-mail address")
    generated = not password_stdin
    password = secrets.token_urlsafe(18) if generated else sys.stdin.readline().rstrip("\r\n")
    if not password:
        _fail("empty password")

    async def work(database: Database) -> User:
        async with database.write() as db:
            return await create_user(db, email=email, password=password, name=name, role=role)

    try:
        user = _with_db(work)
    except UserExistsError:
        _fail(f"a user with e-mail {email.strip().lower()} already exists")
        return
    typer.echo(f"created {user.role} {user.email} (id {user.id})")
    if generated:
        typer.echo(f"password: {password}")


@users_app.command("set-crm")
def users_set_crm(
    email: Annotated[str, typer.Option()],
    location_id: Annotated[str, typer.Option("--location-id")],
) -> None:
    """Link the user's own CRM sub-account (location)."""

    async def work(database: Database) -> bool:
        async with database.write() as db:
            user = await get_user_by_email(db, email)
            if user is None:
                return False
            user.crm_location_id = location_id.strip() or None
            return True

    if not _with_db(work):
        _fail(f"no user with e-mail {email}")
    typer.echo(f"linked {email} to CRM location {location_id}")


@tokens_app.command("create")
def tokens_create(
    email: Annotated[str, typer.Option()],
    label: Annotated[str, typer.Option()] = "",
) -> None:
    """Create an API token and print it once."""

    async def work(database: Database) -> str | None:
        async with database.write() as db:
            user = await get_user_by_email(db, email)
            if user is None:
                return None
            return await create_api_token(db, user, label)

    token = _with_db(work)
    if token is None:
        _fail(f"no user with e-mail {email}")
    typer.echo(token)


def main() -> None:
    app()
