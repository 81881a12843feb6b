"""Verified HTTP-basic credentials, so that a script sending its account password on every
request pays for Argon2 once a minute instead of once a request.

An entry is keyed by a MAC (keyed BLAKE2b) of the e-mail and password under a key made when
the process starts (never stored anywhere), and holds the user's id and a MAC of the password
hash it was verified against: never the password. It lives at most `TTL_S` seconds. A hit still
needs the user row the request reads anyway (which excludes disabled and deleted users), and
counts only while that row's password hash is the one verified, so a password change, reset,
disabling or deletion by any process, on any instance, takes effect at the next request.
This process also drops a user's entries at once when it revokes their sessions.

One cache per `Database` object: two app instances in one process (the tests) behave like
two processes.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from cachetools import TTLCache

from controlcenter.db import Database

TTL_S = 60
MAX_ENTRIES = 10_000


class VerifiedCredentials:
    def __init__(self, *, ttl_s: float = TTL_S, max_entries: int = MAX_ENTRIES) -> None:
        self._key = secrets.token_bytes(32)
        self._entries: TTLCache[bytes, tuple[str, bytes]] = TTLCache(max_entries, ttl_s)
        self._verifying: dict[bytes, asyncio.Event] = {}

    def _mac(self, *parts: str) -> bytes:
        message = "\0".join(parts).encode("utf-8", "surrogatepass")
        # BLAKE2b's keyed mode is a MAC of its own: 0.8 us against HMAC-SHA256's 2.5-3.7, and
        # a password's request makes three (the dashboard's basic + password path).
        return hashlib.blake2b(message, key=self._key, digest_size=32).digest()

    def hit(self, email: str, password: str, user_id: str, password_hash: str) -> bool:
        """Whether this password was verified for this user against this very hash."""
        entry = self._entries.get(self._mac("credentials", email, password))
        if entry is None:
            return False
        return entry[0] == user_id and hmac.compare_digest(
            entry[1], self._mac("hash", password_hash)
        )

    def remember(self, email: str, password: str, user_id: str, password_hash: str) -> None:
        self._entries[self._mac("credentials", email, password)] = (
            user_id,
            self._mac("hash", password_hash),
        )

    async def settled(self, email: str, password: str) -> None:
        """Wait while these very credentials are being verified by another request."""
        event = self._verifying.get(self._mac("credentials", email, password))
        if event is not None:
            await event.wait()

    @asynccontextmanager
    async def verifying(self, email: str, password: str) -> AsyncIterator[None]:
        """Mark these credentials as being verified, for `settled`."""
        key = self._mac("credentials", email, password)
        event = self._verifying.setdefault(key, asyncio.Event())
        try:
            yield
        finally:
            if self._verifying.get(key) is event:
                del self._verifying[key]
            event.set()

    def forget_user(self, user_id: str) -> None:
        for key, (owner, _) in list(self._entries.items()):
            if owner == user_id:
                self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)


_caches: weakref.WeakKeyDictionary[Database, VerifiedCredentials] = weakref.WeakKeyDictionary()


def verified_credentials(database: Database) -> VerifiedCredentials:
    """The cache of the processes' requests against `database`."""
    cache = _caches.get(database)
    if cache is None:
        cache = _caches[database] = VerifiedCredentials()
    return cache
