"""Sign-in throttling shared by every process: it lives in the database.

Guesses are limited where they come from, so that nobody can lock an owner out on their own:

- per e-mail and source together (10 within the window): what one attacker gets at one account;
- per source (50): what one attacker gets across accounts (password spraying);
- per e-mail from every source (100): the account's ceiling against a distributed guesser,
  which only someone holding many sources can reach (docs/security.md: numbers and reasons).

A source is the client's IPv4 address, or its IPv6 /64 (one subscriber's allocation: an
attacker has 2^64 addresses in it, which must not count as many sources).

Each password attempt is written down before the password is checked, one row per key, then
counted: over a limit within the window, the attempt is refused and its rows removed (a
refused attempt is not a failure, so hammering does not extend the block). A success removes
the e-mail-and-source rows. Writing first and counting after the commit means that of any burst
of concurrent attempts at most the limit get through, whatever the number of processes: the
n-th row committed sees at least n rows.

Rows are stored under a SHA-256 of the e-mail or source, never the value itself (someone who
types their password into the e-mail field leaves no trace of it).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from controlcenter.auth.attempts import SignInAttempt
from controlcenter.common.emails import normalise_email
from controlcenter.config import Config
from controlcenter.db import Database

TOO_MANY_ATTEMPTS = "Too many attempts"
IPV6_SOURCE_PREFIX = 64


class TooManyAttemptsError(Exception):
    """Refused by the throttle; `retry_after_s` is when the window lets the caller in again."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(TOO_MANY_ATTEMPTS)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Attempt:
    """An attempt let through; tell the throttle when it succeeded."""

    pair_key: str
    row_ids: tuple[int, ...]


def source_of(address: str | None) -> str:
    """The source an address counts as: itself (IPv4, or IPv4 mapped into IPv6) or its IPv6
    /64; an unknown address is the empty source, shared by every such client."""
    if not address:
        return ""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_SOURCE_PREFIX), strict=False))
    return str(ip)


@dataclass(frozen=True)
class SignInThrottle:
    database: Database
    window_s: float
    per_email_and_source: int
    per_source: int
    per_email: int
    clock: Callable[[], float] = field(default=time.time)  # epoch seconds, as every process reads

    @classmethod
    def from_config(cls, database: Database, config: Config) -> SignInThrottle:
        return cls(
            database,
            window_s=config.signin_window_s,
            per_email_and_source=config.signin_max_failures_per_email_and_address,
            per_source=config.signin_max_failures_per_address,
            per_email=config.signin_max_failures_per_email,
        )

    async def begin(self, email: str, address: str | None) -> Attempt:
        """Record an attempt for `email` from `address`; raises TooManyAttemptsError."""
        account, source = normalise_email(email), source_of(address)
        pair_key = _key("email+source", f"{account}\0{source}")
        limits = {pair_key: self.per_email_and_source, _key("email", account): self.per_email}
        if source:
            limits[_key("address", source)] = self.per_source
        now = self.clock()
        since = now - self.window_s
        ids = await self.database.run_write(_record, list(limits), now, since)
        counts = await self.database.run_read(_count, list(limits), since)
        blocked = [(key, limit) for key, limit in limits.items() if counts.get(key, 0) > limit]
        if not blocked:
            return Attempt(pair_key=pair_key, row_ids=ids)
        await self.database.run_write(_remove, ids)
        waits = [await self._retry_after(key, limit, since, now) for key, limit in blocked]
        raise TooManyAttemptsError(max(waits))

    async def succeeded(self, attempt: Attempt) -> None:
        """A success clears the count of its e-mail from its source (and is no failure for the
        e-mail's ceiling nor the source); what others tried stays counted."""
        await self.database.run_write(_clear, attempt)

    async def _retry_after(self, key: str, limit: int, since: float, now: float) -> int:
        """Seconds until fewer than `limit` failures remain in the window."""
        oldest_counted = await self.database.run_read(_oldest_counted, key, limit, since)
        if oldest_counted is None:
            return 1
        return max(1, math.ceil(float(oldest_counted) + self.window_s - now))


def _record(session: Session, keys: list[str], now: float, since: float) -> tuple[int, ...]:
    """Forget the attempts older than the window and write down this one under each key; the
    new rows' ids."""
    session.execute(delete(SignInAttempt).where(SignInAttempt.at <= since))
    rows = [SignInAttempt(key=key, at=now) for key in keys]
    session.add_all(rows)
    session.flush()
    return tuple(row.id for row in rows)


def _count(session: Session, keys: list[str], since: float) -> dict[str, int]:
    """Every key's count within the window in one statement: a sign-in reads the table once,
    not once a key."""
    counted = (
        select(SignInAttempt.key, func.count())
        .where(SignInAttempt.key.in_(keys), SignInAttempt.at > since)
        .group_by(SignInAttempt.key)
    )
    return {key: n for key, n in session.execute(counted).all()}


def _remove(session: Session, ids: tuple[int, ...]) -> None:
    session.execute(delete(SignInAttempt).where(SignInAttempt.id.in_(ids)))


def _clear(session: Session, attempt: Attempt) -> None:
    session.execute(
        delete(SignInAttempt).where(
            (SignInAttempt.key == attempt.pair_key) | SignInAttempt.id.in_(attempt.row_ids)
        )
    )


def _oldest_counted(session: Session, key: str, limit: int, since: float) -> float | None:
    """When the `limit`-th newest of the key's attempts within the window was made."""
    return session.scalar(
        select(SignInAttempt.at)
        .where(SignInAttempt.key == key, SignInAttempt.at > since)
        .order_by(SignInAttempt.at.desc())
        .offset(limit - 1)
        .limit(1)
    )


def _key(kind: str, value: str) -> str:
    return hashlib.sha256(f"{kind}:{value}".encode("utf-8", "surrogatepass")).hexdigest()
