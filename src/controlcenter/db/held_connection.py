"""One connection of the engine's pool kept checked out, for a writer that writes all the time.

The chat's event writer writes a few rows a transaction in the driver's own SQL
(`Database.write_driver`). Taking a connection from SQLAlchemy's pool and giving it back (its
`Connection` object, the pool's events and reset, the greenlet hand-offs) cost ~0.35 ms of CPU
a transaction, measured cold as a lone chat's are (one after each provider pause): more than
the statements themselves. A held connection costs nothing of that after its first use. It is
the pool's own (made with the engine's settings and `connect` events) and goes back at `close`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn


class HeldConnection:
    """The driver's connection under one held pooled connection, for one user at a time
    (`take`, then `give_back`: a lock and a context manager cost a lone chat's writer more
    than the check)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._held: PoolProxiedConnection | None = None
        self._in_use = False

    async def take(self) -> Any | None:
        """The driver's connection (an aiosqlite-style one, or asyncpg's); None while another
        caller has it."""
        if self._in_use:
            return None
        self._in_use = True
        try:
            if self._held is not None and _closed(self._held.driver_connection):
                await self._drop()  # closed by the server meanwhile
            if self._held is None:
                self._held = await self._engine.raw_connection()
        except BaseException:
            self._in_use = False
            raise
        return self._held.driver_connection

    async def give_back(self, *, failed: bool) -> None:
        """After `take`. `failed`: something went wrong while it was used (the database
        refused, the connection was lost, a statement was cut by a cancel): its state is
        unknown, so it is dropped (invalidated) and the next `take` opens another."""
        try:
            if failed:
                await self._drop()
        finally:
            self._in_use = False

    async def _drop(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            await greenlet_spawn(held.invalidate)

    async def close(self) -> None:
        """Give the connection back to the pool (before the engine is disposed)."""
        held, self._held = self._held, None
        if held is not None:
            await greenlet_spawn(held.close)


def _closed(driver: Any) -> bool:
    """asyncpg's connection knows when it was closed; a closed SQLite one raises when used."""
    is_closed = getattr(driver, "is_closed", None)
    return bool(is_closed()) if is_closed is not None else False
