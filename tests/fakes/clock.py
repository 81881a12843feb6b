"""Clocks a test moves by hand, for code that reads the time or waits on it.

`ManualClock` (monotonic seconds): its `sleep` returns at once, moving the clock on by what was
asked, and keeps each wait in `waits`, so a test sees how long the code meant to wait.

    clock = ManualClock()
    cache = CustomFieldIds(recheck_s=60.0, clock=clock)
    clock.advance(61.0)

`FakeClock` (aware UTC datetimes, for code that takes a `Clock`, such as the CRM's rate
limiter): its sleepers wake only when `advance` passes their time, so a test can hold a task
in its wait and look at what else runs meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta

from controlcenter.db import utcnow


class ManualClock:
    """Monotonic seconds, starting at `start`, that move only when told (any thread)."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.waits: list[float] = []

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    async def sleep(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(seconds)
            self._now += seconds
        await asyncio.sleep(0)  # still a point where other tasks run, as a real wait is


class FakeClock:
    """Time that moves only on `advance`; `sleep` waits until then."""

    def __init__(self) -> None:
        self._now = utcnow()
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []
        self._sleeping = asyncio.Event()
        self.waits: list[float] = []  # each sleep's seconds, as asked, over the clock's life

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._now + timedelta(seconds=seconds), woken)
        self._sleepers.append(entry)
        self.waits.append(seconds)
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
