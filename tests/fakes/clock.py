"""A clock a test moves by hand, for code that reads the time or waits on it.

    clock = ManualClock()
    cache = CustomFieldIds(recheck_s=60.0, clock=clock)
    clock.advance(61.0)

Its `sleep` returns at once, moving the clock on by what was asked, and keeps each wait in
`waits`: a test sees how long the code meant to wait instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import threading


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
