"""One SDK client per API key, all sharing one HTTP connection pool per provider.

Building an SDK client per chat would build a connection pool per chat; the keys come from the
settings and change rarely, so a few clients per provider are kept, each a `with_options` copy
of one base client (the copy reuses the base client's HTTP pool).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import httpx2
from cachetools import LRUCache

# 1,000 chats at once each hold one connection while waiting for the model.
POOL_LIMITS = httpx2.Limits(max_connections=2048, max_keepalive_connections=1024)
MAX_CACHED_KEYS = 16

C = TypeVar("C")


class KeyedClient(Protocol):
    def with_options(self, *, api_key: str) -> Any: ...


K = TypeVar("K", bound=KeyedClient)


class PooledClients(Generic[K]):
    """One pool per provider; the client for each key is a `with_options` copy of a base
    client built with a placeholder key that is never sent."""

    def __init__(
        self,
        sdk: Callable[..., K],
        http: httpx2.AsyncClient,
        *,
        base_url: str,
        timeout_s: float,
        max_retries: int,
    ) -> None:
        self._http = http
        base = sdk(
            api_key="unset",
            base_url=base_url,
            timeout=timeout_s,
            max_retries=max_retries,
            http_client=http,
        )
        self._cache: ClientCache[K] = ClientCache(lambda key: base.with_options(api_key=key))

    @property
    def http(self) -> httpx2.AsyncClient:
        """The one pool every key's client sends through."""
        return self._http

    def get(self, api_key: str) -> K:
        return self._cache.get(api_key)

    async def aclose(self) -> None:
        await self._http.aclose()


class ClientCache(Generic[C]):
    """A small LRU of SDK clients keyed by API key."""

    def __init__(self, make: Callable[[str], C], size: int = MAX_CACHED_KEYS) -> None:
        self._make = make
        self._clients: LRUCache[str, C] = LRUCache(maxsize=size)

    def get(self, api_key: str) -> C:
        client = self._clients.get(api_key)
        if client is None:
            client = self._clients[api_key] = self._make(api_key)
        return client
