"""Which database a command uses, whether it is there, and its backup and restore.

The default `DATABASE_URL` names a file relative to the working directory, so a command run
from elsewhere would silently start a second, empty database: every command says on stderr
which database it uses, and every command but `serve`, `db upgrade` and `db restore` refuses
to create one. A SQLite database is copied with SQLite's online backup (the sqlite3 module's
`Connection.backup`), which reads a consistent snapshot while `serve` writes; a restore is
refused while a `serve` or `worker` holds the database's lock file.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

import typer
from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url

from controlcenter.config import DEFAULT_DATABASE_URL, Config
from controlcenter.db.migrate import alembic_config
from controlcenter.db.write_turns import SUFFIX as WRITE_TURNS

SERVICE_DIRECTORY_HINT = (
    "set DATABASE_URL to the service's database (as `serve` has it), or run the command "
    "from the service's directory"
)


def sqlite_path(config: Config) -> Path | None:
    """The SQLite file, absolute; None on PostgreSQL."""
    if not config.is_sqlite:
        return None
    database = make_url(config.database_url).database
    assert database  # check_database_url refuses an in-memory database
    return Path(database).resolve()


def location(config: Config) -> str:
    """The database as an operator reads it: the file, or the URL without its password."""
    path = sqlite_path(config)
    if path is not None:
        return str(path)
    return make_url(config.database_url).render_as_string(hide_password=True)


def announce(config: Config) -> None:
    """Say on stderr which database the command uses (a log record when logs are JSON, so
    that every line stays JSON)."""
    if config.log_format == "json":
        from controlcenter.common.logs import get_logger

        get_logger(__name__).info("database", location=location(config))
    else:
        typer.echo(f"database: {location(config)}", err=True)


def missing(config: Config) -> bool:
    """True when the configured SQLite file does not exist. A PostgreSQL database is made by
    its administrator; connecting tells whether it is there."""
    path = sqlite_path(config)
    return path is not None and not path.exists()


def require(config: Config) -> None:
    """Exit 1 with `No database at <location>` when there is none (nothing is created)."""
    if missing(config):
        typer.echo(f"error: No database at {location(config)}", err=True)
        typer.echo(f"  {SERVICE_DIRECTORY_HINT}.", err=True)
        raise typer.Exit(1)


def command_prefix(config: Config) -> str:
    """The environment a command needs to reach this instance's database and keys: the
    `DATABASE_URL` and `VAR_DIR` it was given, absolute where they name files, and without
    the database's password."""
    parts = []
    if config.database_url != DEFAULT_DATABASE_URL:
        path = sqlite_path(config)
        url = (
            make_url(config.database_url).set(database=str(path))
            if path is not None
            else make_url(config.database_url)
        )
        parts.append("DATABASE_URL=" + shlex.quote(url.render_as_string(hide_password=True)))
    if config.var_dir != Config.model_fields["var_dir"].default:
        parts.append("VAR_DIR=" + shlex.quote(str(config.var_dir.resolve())))
    return "".join(part + " " for part in parts)


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


@contextmanager
def in_use(config: Config) -> Iterator[None]:
    """Hold the SQLite database's lock file shared while a `serve` or `worker` runs; the
    kernel drops it when the process ends, however it ends."""
    path = sqlite_path(config)
    if path is None:
        yield
        return
    lock = _lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _postgres_refusal(tool: str, command: str) -> NoReturn:
    typer.echo(f"error: on PostgreSQL use {tool}: {command}", err=True)
    raise typer.Exit(1)


def _libpq_url(config: Config) -> str:
    """The URL as pg_dump and pg_restore take it (no driver name, no password)."""
    return shlex.quote(location(config).replace("+asyncpg", "", 1))


def backup(config: Config, target: Path) -> Path:
    """Copy the live SQLite database to `target`, or into it when it is a folder (a file
    named for the moment, `controlcenter-YYYYMMDD-HHMMSS.db`, UTC); the copy replaces a file
    whole and is never left half-written. Refused: the live database itself (or one of its
    companion files), a folder that is not there. The caller has refused a database that is
    not there (`require`). Returns the file written."""
    path = sqlite_path(config)
    if path is None:
        file = shlex.quote(str(target))
        _postgres_refusal("pg_dump", f"pg_dump --format=custom --file {file} {_libpq_url(config)}")
    if target.is_dir():
        moment = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        target = target / f"{path.stem}-{moment}{path.suffix or '.db'}"
    if _is_live(path, target):
        _refuse(f"{target} is the live database: back up to another file, or into a folder")
    if not target.parent.is_dir():
        _refuse(f"the folder {target.parent} does not exist: create it, or choose another")
    partial = target.with_name(target.name + ".partial")
    try:
        partial.unlink(missing_ok=True)
        with (
            closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as source,
            closing(sqlite3.connect(partial)) as copy,
        ):
            source.backup(copy)
        os.replace(partial, target)
    except (OSError, sqlite3.Error) as exc:
        with suppress(OSError):  # what is in the way may not be a file this command wrote
            partial.unlink(missing_ok=True)
        _refuse(f"the copy could not be written to {target}: {_reason(exc)}")
    return target


def _is_live(path: Path, target: Path) -> bool:
    """Whether `target` is the database or one of the files SQLite and `serve` keep beside
    it (its write-ahead log, shared memory, lock, writers' turns): writing there would damage
    it."""
    ends = ("-wal", "-shm", ".lock", WRITE_TURNS)
    companions = [path, *(path.with_name(path.name + end) for end in ends)]
    resolved = target.resolve()
    for companion in companions:
        if resolved == companion:
            return True
        if companion.exists() and target.exists() and os.path.samefile(companion, target):
            return True
    return False


def _reason(exc: BaseException) -> str:
    """An OS or SQLite error in words, without its traceback."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


def _refuse(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def restore(config: Config, copy_path: Path) -> None:
    """Replace the SQLite database with a copy made by `backup`."""
    path = sqlite_path(config)
    if path is None:
        file = shlex.quote(str(copy_path))
        _postgres_refusal(
            "pg_restore", f"pg_restore --clean --if-exists --dbname {_libpq_url(config)} {file}"
        )
    if not copy_path.exists():
        _refuse(f"{copy_path} does not exist: give the path of a copy made by `db backup`")
    if copy_path.is_dir():
        _refuse(f"{copy_path} is a folder: give the path of a copy made by `db backup` in it")
    revision = _schema_of(copy_path)
    if revision is None:
        typer.echo(f"error: {copy_path} is not a backup of this service's database", err=True)
        raise typer.Exit(1)
    if revision and not _known(config, revision):
        # This version could neither serve it nor migrate it: refused before anything changes.
        typer.echo(
            f"error: {copy_path} was made by a newer version of the service (schema "
            f"{revision}): upgrade the service first, then restore",
            err=True,
        )
        raise typer.Exit(1)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(_lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            typer.echo(
                f"error: a running `serve` or `worker` uses {path}: stop it, then restore",
                err=True,
            )
            raise typer.Exit(1) from None
        # The backup API writes through SQLite, which also resets the write-ahead log.
        with (
            closing(sqlite3.connect(f"file:{copy_path}?mode=ro", uri=True)) as source,
            closing(sqlite3.connect(path)) as target,
        ):
            source.backup(target)
    finally:
        os.close(fd)


def _schema_of(copy_path: Path) -> str | None:
    """The copy's schema revision ("" before the first migration); None when it is not a
    database of this service."""
    if not copy_path.is_file():
        return None
    try:
        with closing(sqlite3.connect(f"file:{copy_path}?mode=ro", uri=True)) as conn:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
            ).fetchone()
            if found is None:
                return None
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError:
        return None
    return str(row[0]) if row else ""


def _known(config: Config, revision: str) -> bool:
    """Whether this version's migrations hold `revision`."""
    scripts = ScriptDirectory.from_config(alembic_config(config.database_url))
    return any(script.revision == revision for script in scripts.walk_revisions())
