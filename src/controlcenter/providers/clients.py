"""One SDK client per API key, over a few HTTP connection pools per provider.

Building an SDK client per chat would build a connection pool per chat; the keys come from the
settings and change rarely, so a few clients per provider are kept, each a `with_options` copy
of one base client (the copy reuses the base client's HTTP pool).

A call never waits for a connection: a chat waiting for the model holds its call's connection
for as long as the model takes (30 s and more), so a capped pool makes the chats past the cap
wait for the ones before them and fail at the provider timeout. The pools are uncapped; what
bounds the connections is the chats in flight, and so the process's open-files limit (each
chat holds two sockets, see cli/open_files.py).

Calls are spread over pools of `SHARD_CALLS` calls each, filled in order: httpcore's pool walks
all its connections on every request and every response's end, and probes the socket of each
idle one (a system call, through anyio's attribute lookup), so a call's CPU grows with its pool,
and small pools keep each call's share of that walk small. Each pool keeps a kept-alive
connection for every call it carries: keeping half closes and opens a connection for one call
in fifteen under a load that comes and goes, a TLS handshake each against the real API. The
first pool takes every call while it has room, so a quiet service reuses one pool's
connections; the next pool opens only when the first is full.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar

import httpx2
from cachetools import LRUCache

SHARD_CALLS = 16  # calls in flight per pool before the next pool takes them
MAX_CACHED_KEYS = 16

C = TypeVar("C")


def shard_limits() -> httpx2.Limits:
    """A pool's limits: no cap on connections, one kept alive for each call it carries."""
    return httpx2.Limits(max_connections=None, max_keepalive_connections=SHARD_CALLS)


class KeyedClient(Protocol):
    def with_options(self, *, api_key: str) -> Any: ...


K = TypeVar("K", bound=KeyedClient)


class _Shard(Generic[K]):
    """One HTTP pool, the key's clients over it, and the calls it carries now."""

    __slots__ = ("cache", "http", "in_flight")

    def __init__(self, http: httpx2.AsyncClient, base: K) -> None:
        self.http = http
        self.cache: ClientCache[K] = ClientCache(lambda key: base.with_options(api_key=key))
        self.in_flight = 0


class PooledClients(Generic[K]):
    """The pools of one provider; the client for each key is a `with_options` copy of a pool's
    base client, built with a placeholder key that is never sent."""

    def __init__(
        self,
        sdk: Callable[..., K],
        http: Callable[[], httpx2.AsyncClient],
        *,
        base_url: str,
        timeout_s: float,
        max_retries: int,
    ) -> None:
        def shard() -> _Shard[K]:
            pool = http()
            base = sdk(
                api_key="unset",
                base_url=base_url,
                timeout=timeout_s,
                max_retries=max_retries,
                http_client=pool,
            )
            return _Shard(pool, base)

        self._new_shard = shard
        self._shards: list[_Shard[K]] = [shard()]

    @property
    def http(self) -> httpx2.AsyncClient:
        """The pool a quiet service sends every call through."""
        return self._shards[0].http

    def get(self, api_key: str) -> K:
        """The client a call made now would use."""
        return self._shard().cache.get(api_key)

    @contextmanager
    def lease(self, api_key: str) -> Iterator[K]:
        """The client for one call, counted in its pool until the call ends."""
        shard = self._shard()
        shard.in_flight += 1
        try:
            yield shard.cache.get(api_key)
        finally:
            shard.in_flight -= 1

    def _shard(self) -> _Shard[K]:
        for shard in self._shards:
            if shard.in_flight < SHARD_CALLS:
                return shard
        self._shards.append(self._new_shard())
        return self._shards[-1]

    async def aclose(self) -> None:
        for shard in self._shards:
            await shard.http.aclose()


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
