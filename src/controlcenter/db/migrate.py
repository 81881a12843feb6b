"""Apply the Alembic migrations shipped inside the package."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import MetaData

_HERE = Path(__file__).parent


def alembic_config(database_url: str, target_metadata: MetaData | None = None) -> AlembicConfig:
    """`target_metadata`: the tables autogenerate compares against (`controlcenter.tables`)."""
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(_HERE / "migrations"))
    cfg.set_main_option("sqlalchemy.url", database_url)
    cfg.attributes["target_metadata"] = target_metadata
    return cfg


def upgrade(database_url: str) -> None:
    """Migrate to the newest revision. Safe to call from inside a running event loop."""
    _ensure_sqlite_dir(database_url)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        command.upgrade(alembic_config(database_url), "head")
        return
    # env.py runs its own event loop, which cannot nest inside a running one.
    errors: list[BaseException] = []

    def run() -> None:
        try:
            command.upgrade(alembic_config(database_url), "head")
        except BaseException as exc:  # handed back to the caller below
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]


def _ensure_sqlite_dir(database_url: str) -> None:
    prefix = "sqlite+aiosqlite:///"
    if database_url.startswith(prefix):
        path = database_url[len(prefix) :].split("?", 1)[0]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
