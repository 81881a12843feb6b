"""Alembic environment: runs on the async engine of the configured database.

Autogenerate compares against the metadata of every table, which only the layer above the
domains knows: whoever asks for it hands `controlcenter.tables.Base.metadata` over as the
config's `target_metadata` attribute (`alembic_config(url, target_metadata=...)`).
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

target_metadata = context.config.attributes.get("target_metadata")


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


url = context.config.get_main_option("sqlalchemy.url")
assert url, "sqlalchemy.url must be set by controlcenter.db.migrate"
asyncio.run(_run_async(url))
