"""Sign-in throttling shared by every process: it lives in the database.

Each password attempt is written down before the password is checked, one row for the e-mail
and one for the client address, then counted: over the limit within the window, the attempt
is refused and its rows removed (a refused attempt is not a failure, so hammering does not
extend the block). A success removes the e-mail's rows. Writing first and counting after the
commit means that of any burst of concurrent attempts at most the limit get through, whatever
the number of processes: the n-th row committed sees at least n rows.

Rows are stored under a SHA-256 of the e-mail or address, never the value itself (someone who
types their password into the e-mail field leaves no trace of it).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

from sqlalchemy import ColumnElement, delete, func, select

from controlcenter.auth.attempts import SignInAttempt
from controlcenter.common.emails import normalise_email
from controlcenter.config import Config
from controlcenter.db import Database

TOO_MANY_ATTEMPTS = "Too many attempts"


class TooManyAttemptsError(Exception):
    """Refused by the throttle; `retry_after_s` is when the window lets the caller in again."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(TOO_MANY_ATTEMPTS)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Attempt:
    """An attempt let through; tell the throttle when it succeeded."""

    email_key: str
    row_ids: tuple[int, ...]


@dataclass(frozen=True)
class SignInThrottle:
    database: Database
    window_s: float
    per_email: int
    per_address: int

    @classmethod
    def from_config(cls, database: Database, config: Config) -> SignInThrottle:
        return cls(
            database,
            window_s=config.signin_window_s,
            per_email=config.signin_max_failures_per_email,
            per_address=config.signin_max_failures_per_address,
        )

    async def begin(self, email: str, address: str | None) -> Attempt:
        """Record an attempt for `email` from `address`; raises TooManyAttemptsError."""
        limits = {_key("email", normalise_email(email)): self.per_email}
        if address:
            limits[_key("address", address)] = self.per_address
        now = time.time()
        async with self.database.write() as db:
            await db.execute(delete(SignInAttempt).where(SignInAttempt.at <= now - self.window_s))
            rows = [SignInAttempt(key=key, at=now) for key in limits]
            db.add_all(rows)
        ids = tuple(row.id for row in rows)
        async with self.database.read() as db:
            blocked = [
                (key, limit)
                for key, limit in limits.items()
                if (await db.scalar(select(func.count()).where(*self._recent(key, now))) or 0)
                > limit
            ]
        if not blocked:
            return Attempt(email_key=next(iter(limits)), row_ids=ids)
        async with self.database.write() as db:
            await db.execute(delete(SignInAttempt).where(SignInAttempt.id.in_(ids)))
        waits = [await self._retry_after(key, limit, now) for key, limit in blocked]
        raise TooManyAttemptsError(max(waits))

    async def succeeded(self, attempt: Attempt) -> None:
        """A success clears the e-mail's count (and is no failure for the address)."""
        async with self.database.write() as db:
            await db.execute(
                delete(SignInAttempt).where(
                    (SignInAttempt.key == attempt.email_key) | SignInAttempt.id.in_(attempt.row_ids)
                )
            )

    def _recent(self, key: str, now: float) -> tuple[ColumnElement[bool], ...]:
        return (SignInAttempt.key == key, SignInAttempt.at > now - self.window_s)

    async def _retry_after(self, key: str, limit: int, now: float) -> int:
        """Seconds until fewer than `limit` failures remain in the window."""
        async with self.database.read() as db:
            oldest_counted = await db.scalar(
                select(SignInAttempt.at)
                .where(*self._recent(key, now))
                .order_by(SignInAttempt.at.desc())
                .offset(limit - 1)
                .limit(1)
            )
        if oldest_counted is None:
            return 1
        return max(1, math.ceil(float(oldest_counted) + self.window_s - now))


def _key(kind: str, value: str) -> str:
    return hashlib.sha256(f"{kind}:{value}".encode()).hexdigest()
