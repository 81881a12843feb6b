"""One SDK client per API key, all sharing one HTTP connection pool per provider.

Building an SDK client per chat would build a connection pool per chat; the keys come from the
settings and change rarely, so a few clients per provider are kept, each a `with_options` copy
of one base client (the copy reuses the base client's HTTP pool).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

import httpx2

# 1,000 chats at once each hold one connection while waiting for the model.
POOL_LIMITS = httpx2.Limits(max_connections=2048, max_keepalive_connections=1024)
MAX_CACHED_KEYS = 16

C = TypeVar("C")


class ClientCache(Generic[C]):
    """A small LRU of SDK clients keyed by API key."""

    def __init__(self, make: Callable[[str], C], size: int = MAX_CACHED_KEYS) -> None:
        self._make = make
        self._size = size
        self._clients: OrderedDict[str, C] = OrderedDict()

    def get(self, api_key: str) -> C:
        client = self._clients.get(api_key)
        if client is None:
            client = self._make(api_key)
            self._clients[api_key] = client
            if len(self._clients) > self._size:
                self._clients.popitem(last=False)
        else:
            self._clients.move_to_end(api_key)
        return client
