"""Credentials recognised from memory after their first check.

A session JWT, an API token or an HTTP basic credential (an e-mail with the account's password
or one of its API tokens), once checked against the database (a password also by Argon2), is
kept with the caller it names, so the next request that carries it reads nothing. The cache
is a cachetools TTLCache under the topic `CREDENTIALS` (`db.changes.Kept`): every write that
ends or changes what a credential names (a logout, a token revoked, a user disabled, deleted,
given another role, password or details) marks the topic changed in its transaction, so this
process forgets every entry as it commits and every other process and instance within a
second. An entry lives at most `TTL_S` seconds, and a session's entry is refused once the
session expires.

An entry is keyed by a MAC (keyed BLAKE2b) of the credential under a key made when the process
starts and never stored: the cache holds no credential. Only a credential that passed is kept;
a wrong password or an unknown token is checked every time (and a password attempt meets the
sign-in throttle). The same basic credentials arriving together (a script's parallel
requests) wait for the first one's check instead of each running Argon2.

One cache per `Database` object: two app instances in one process (the tests) behave like
two processes.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from controlcenter.auth.principal import Principal
from controlcenter.db import Database
from controlcenter.db.changes import Changes, Kept

CREDENTIALS = "credentials"  # the topic of what `VerifiedCredentials` keeps
TTL_S = 60
MAX_ENTRIES = 10_000


@dataclass
class Known:
    """A checked credential: the caller, a session's expiry, and for an API token its id and
    when its use was last written (updated in place when it is written again)."""

    principal: Principal
    expires_at: datetime | None = None
    token_id: str | None = None
    used_at: datetime | None = None


class VerifiedCredentials:
    def __init__(
        self,
        changes: Changes,
        *,
        ttl_s: float = TTL_S,
        max_entries: int = MAX_ENTRIES,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._key = secrets.token_bytes(32)
        self._kept: Kept[bytes, Known] = Kept(
            changes, CREDENTIALS, maxsize=max_entries, ttl_s=ttl_s, timer=timer
        )
        self._verifying: dict[bytes, asyncio.Event] = {}

    def key(self, *parts: str) -> bytes:
        """The cache key of a credential (its kind first): a MAC, never the credential."""
        message = "\0".join(parts).encode("utf-8", "surrogatepass")
        return hashlib.blake2b(message, key=self._key, digest_size=32).digest()

    def get(self, key: bytes) -> Known | None:
        return self._kept.get(key)

    def reading(self) -> int | None:
        """Taken before the database is read, for `keep`."""
        return self._kept.reading()

    def keep(self, read_under: int | None, key: bytes, known: Known) -> None:
        """Keep a credential that passed, unless a change overtook its check."""
        self._kept.keep(read_under, key, known)

    async def settled(self, key: bytes) -> None:
        """Wait while this very credential is being verified by another request."""
        event = self._verifying.get(key)
        if event is not None:
            await event.wait()

    @asynccontextmanager
    async def verifying(self, key: bytes) -> AsyncIterator[None]:
        """Mark this credential as being verified, for `settled`."""
        event = self._verifying.setdefault(key, asyncio.Event())
        try:
            yield
        finally:
            if self._verifying.get(key) is event:
                del self._verifying[key]
            event.set()

    def __len__(self) -> int:
        return len(self._kept)


_caches: weakref.WeakKeyDictionary[Database, VerifiedCredentials] = weakref.WeakKeyDictionary()


def verified_credentials(database: Database) -> VerifiedCredentials:
    """The cache of the process's requests against `database`."""
    cache = _caches.get(database)
    if cache is None:
        cache = _caches[database] = VerifiedCredentials(database.changes)
    return cache
