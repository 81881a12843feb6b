"""One connection of the engine's pool kept checked out, for a writer that writes all the time.

The chat's event writer writes a few rows a transaction in the driver's own SQL
(`Database.write_driver`). Taking a connection from SQLAlchemy's pool and giving it back (its
`Connection` object, the pool's events and reset, the greenlet hand-offs) cost ~0.35 ms of CPU
a transaction, measured cold as a lone chat's are (one after each provider pause): more than
the statements themselves. A held connection costs nothing of that after its first use. It is
the pool's own (made with the engine's settings and `connect` events) and goes back at `close`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn


class HeldConnection:
    """The driver's connection under one held pooled connection, for one user at a time."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        setup: Callable[[Any], Awaitable[None]] | None = None,
        reset: Callable[[Any], Awaitable[None]] | None = None,
    ) -> None:
        """`setup` runs on each connection when it is taken to be held, `reset` before it goes
        back to the pool (a setting only its holder wants)."""
        self._engine = engine
        self._setup = setup
        self._reset = reset
        self._held: PoolProxiedConnection | None = None
        self.in_use = False  # a caller that must not wait takes a pooled connection instead

    @asynccontextmanager
    async def use(self) -> AsyncIterator[Any]:
        """The driver's connection (an aiosqlite-style one, or asyncpg's), when not `in_use`.
        Whatever escapes the block (the database refused, the connection was lost, a
        statement was cut by a cancel) drops it (invalidated): its state is unknown, and the
        next use opens another."""
        assert not self.in_use
        self.in_use = True
        try:
            if self._held is not None and _closed(self._held.driver_connection):
                await self._drop()  # closed by the server meanwhile
            if self._held is None:
                held = await self._engine.raw_connection()
                if self._setup is not None:
                    await self._setup(held.driver_connection)
                self._held = held
            try:
                yield self._held.driver_connection
            except BaseException:
                await self._drop()
                raise
        finally:
            self.in_use = False

    async def _drop(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            await greenlet_spawn(held.invalidate)

    async def close(self) -> None:
        """Give the connection back to the pool (before the engine is disposed)."""
        held, self._held = self._held, None
        if held is None:
            return
        if self._reset is not None:
            try:
                await self._reset(held.driver_connection)
            except Exception:
                await greenlet_spawn(held.invalidate)  # its settings unknown: not for others
                return
        await greenlet_spawn(held.close)


def _closed(driver: Any) -> bool:
    """asyncpg's connection knows when it was closed; a closed SQLite one raises when used."""
    is_closed = getattr(driver, "is_closed", None)
    return bool(is_closed()) if is_closed is not None else False
