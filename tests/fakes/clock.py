"""A clock that moves only when a test moves it, for code that takes a `Clock` (the CRM's
rate limiter): its sleepers wake when `advance` passes their time, never on their own."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from controlcenter.db import utcnow


class FakeClock:
    def __init__(self) -> None:
        self._now = utcnow()
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []
        self._sleeping = asyncio.Event()
        self.slept = 0  # sleeps begun, over the clock's life

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._now + timedelta(seconds=seconds), woken)
        self._sleepers.append(entry)
        self.slept += 1
        self._sleeping.set()
        try:
            await woken
        finally:
            self._sleepers.remove(entry)
            if not self._sleepers:
                self._sleeping.clear()

    async def until_sleeping(self) -> None:
        """Returns once some task sleeps on this clock."""
        await self._sleeping.wait()

    def advance(self, seconds: float) -> None:
        """Time moves on by `seconds`; the sleepers whose time has come wake."""
        self._now += timedelta(seconds=seconds)
        for until, woken in self._sleepers:
            if until <= self._now and not woken.done():
                woken.set_result(None)
