"""The cyclic garbage collector, set for a long-running server once it has started.

Reference counting frees almost everything a request makes; the cyclic collector is for the
rest, and by default it walks every tracked object of a generation when it runs: the whole
heap (the modules, SQLAlchemy's and pydantic's machinery, the app) on each full collection,
a large share of a busy server's CPU. So, once the app has started:

- `gc.freeze()` moves every object alive then to a permanent generation that collections no
  longer walk: what start-up built lives as long as the process anyway (Python's documented
  use of `freeze`, for servers).
- The youngest generation is collected after `YOUNG_THRESHOLD` new objects instead of 700:
  most of a request's objects are freed by reference counting before a collection would see
  them, so fewer and larger young collections walk fewer objects in all. The older
  generations keep their defaults, so a true cycle is still freed within a few collections.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """Call once start-up is done (the app's lifespan, before it serves)."""
    gc.collect()  # what start-up left as garbage is freed, not frozen
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
