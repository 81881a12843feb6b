"""What every `controlcenter` subcommand module shares: the database and how to fail."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import typer

from controlcenter.cli import database as where
from controlcenter.common.logs import configure_logging
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.db.migrate import upgrade

T = TypeVar("T")


def with_db(
    work: Callable[[Database], Awaitable[T]],
    *,
    quiet_migrations: bool = True,
    create: bool = False,
) -> T:
    """Migrate, then run `work` against the configured database (logging to stderr, so that
    stdout carries only the command's own output). `quiet_migrations` keeps Alembic's
    per-run notices out of a short command's output; what it changes is still logged.
    Without `create`, a database that is not there is refused, not created."""
    config = opened_config(create=create)
    if quiet_migrations:
        logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
    upgrade(config.database_url)

    async def run() -> T:
        database = Database(config.database_url)
        try:
            return await work(database)
        finally:
            await database.dispose()

    return asyncio.run(run())


def opened_config(*, create: bool = False) -> Config:
    """The configuration, with logging set up and the database announced on stderr; exits
    with `No database at ...` when there is none and `create` is not given."""
    config = Config()
    configure_logging(config.log_level, config.log_format)
    where.announce(config)
    if not create:
        where.require(config)
    return config


def fail(message: str) -> NoReturn:
    """Print `error: message` on stderr and exit with status 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)
