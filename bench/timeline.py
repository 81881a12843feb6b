"""Where a section's wall time goes: each step's seconds, printed as it ends.

    with step("sqlite chat: service answered"):
        service.wait_http(url)

The run's log then reads as a timeline (start-ups, seeding, warm-ups, settling, loads), which
is what deciding what to cut needs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def step(what: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        print(f"bench:   {what}: {time.monotonic() - started:.1f}s", flush=True)
