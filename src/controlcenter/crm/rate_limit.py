"""The CRM's rate limit, kept by us: a token bucket per location, shared by every process and
instance through the database (docs/outbox.md).

HighLevel allows 100 requests per 10 s per app and location (a sliding window) and answers 429
beyond. We spend a share of it (90% by default): tokens refill at `requests * share / window_s`
per second (9/s) into a bucket of one token: the rate alone fills a window with the share, so
no 10 s window holds more than the share (90, plus one) of ours. The other 10% is margin: a
request reaches the CRM a little after its token was taken, and those delays differ, so the
CRM's window can hold requests from a little more than ten of our seconds (a burst of 10 fills
HighLevel's 100 exactly, and under `make bench` meets a 429). The bucket is a row of
`crm_rate_buckets`, taken in a short write transaction (`SELECT ... FOR UPDATE` on PostgreSQL;
SQLite's write lock serialises it), so several processes share one budget. A take says when
the bucket's next token falls due, and the next taker in the process's queue sleeps until that
moment and takes; a taker with nothing learnt yet looks at the bucket first without any lock,
so that a bucket found empty costs no write transaction (on SQLite each waits for the
database's one write lock, beside the requests' own writes). A bucket of one stops refilling
while it is full, so the time between a token falling due and its taker taking it (the
wake-up, the round trip, the write lock) would be lost to the rate: a take up to `ON_TIME` of
a token's interval late is counted from when the token fell due, a later one from that much
before it was taken. The takes thus stay on the rate's grid, each at most a quarter of an
interval after its place on it, and any 10 s still holds at most 91 of them. A 429 pauses
the location for its Retry-After (HighLevel sends none: then the whole window) by emptying
the bucket.

A job's first request waits for its token at most `max_wait_s`; past that it gets
`CrmRateLimited` with the wait still ahead, and the outbox gives the job back for later without
counting an attempt. Once a job has made a request, its later ones wait as long as it takes:
giving it back halfway would spend its first requests' tokens again when it is retried (with
128 jobs in flight and 9 tokens a second, most would be given back halfway, and the outbox
would deliver under 1 job/s).
Each location has its own bucket and its own queue: a slow location never holds back another.
Time is read and waited for through a `Clock`, which tests replace with one they move by hand.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar, Protocol

from sqlalchemy import Float, String, Table, bindparam, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from controlcenter.crm.errors import CrmRateLimited
from controlcenter.db import Base, Database, UTCDateTime, utcnow
from controlcenter.db.upserts import DIALECTS, upsert

RATE_LIMITED = "CRM rate limit: waiting for this location's budget"


class CrmRateBucket(Base):
    __tablename__ = "crm_rate_buckets"

    location_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


# Built once (bound parameters): the bucket is read and written several times a second. FOR
# UPDATE is PostgreSQL's; SQLAlchemy's SQLite dialect leaves it out (the write transaction
# holds the whole database there).
_TABLE: Table = CrmRateBucket.__table__  # type: ignore[assignment]  # declared as a Table
_BUCKET = select(CrmRateBucket.tokens, CrmRateBucket.updated_at).where(
    CrmRateBucket.location_id == bindparam("b_location")
)
_BUCKET_LOCKED = _BUCKET.with_for_update()
_ADD_BUCKET = {dialect: upsert(dialect, _TABLE, key=("location_id",)) for dialect in DIALECTS}
_SET_BUCKET = (
    update(CrmRateBucket)
    .where(CrmRateBucket.location_id == bindparam("b_location"))
    .values(tokens=bindparam("tokens"), updated_at=bindparam("updated_at"))
)


class Clock(Protocol):
    """The time a bucket is stored with and the limiter's waits."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class WallClock:
    """The service's `Clock`: the wall clock, which every process shares, and asyncio's sleep."""

    def now(self) -> datetime:
        return utcnow()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class RateLimit:
    """HighLevel's burst limit and the share of it we spend."""

    requests: int = 100
    window_s: float = 10.0
    share: float = 0.9

    @property
    def rate(self) -> float:
        """Tokens per second."""
        return self.requests * self.share / self.window_s

    # The bucket's size. The rate alone fills a window with the share (`rate * window_s ==
    # requests * share`): a bucket of more than one token would let a window hold more.
    burst: ClassVar[float] = 1.0


class LocationRateLimiter:
    """Takes one request's token of a location, waiting for it up to `max_wait_s`."""

    # How late after its token fell due a take is still counted from that moment, as a share
    # of a token's interval (`_taken_at`). Under one interval, so that the takes in a window of
    # a whole number of intervals are no more than without it.
    ON_TIME = 0.25

    def __init__(
        self, db: Database, limit: RateLimit, *, max_wait_s: float, clock: Clock | None = None
    ) -> None:
        self._db = db
        self.limit = limit
        self._max_wait_s = max_wait_s
        self._clock = clock or WallClock()
        # One taker per location in this process at a time: the others queue here, in
        # asyncio, instead of each reading the row and sleeping on its own.
        self._queues: dict[str, asyncio.Lock] = {}
        # When each location's next token falls due, as this process's last take left it (or
        # found it): the next taker in the queue sleeps until then and takes, without looking
        # at the bucket first. The take stays the judge: a token another process took first
        # is a take that fails and says when the next one is due.
        self._due_after_take: dict[str, datetime] = {}

    def gate(self, location_id: str) -> LocationGate:
        return LocationGate(self, location_id)

    async def acquire(self, location_id: str, *, patient: bool = False) -> None:
        """One token of the location; CrmRateLimited when it cannot come within the wait
        (never when `patient`)."""
        clock = self._clock
        deadline = None if patient else clock.now() + timedelta(seconds=self._max_wait_s)
        queue = self._queues.setdefault(location_id, asyncio.Lock())
        if not await self._enter(queue, deadline):
            raise _limited(1.0 / self.limit.rate)
        try:
            # With nothing known here, look first, without the write lock: a bucket found
            # empty (a token comes every 1/rate s and several processes wait for it) costs no
            # write transaction, which would compete with the requests' writes.
            due = self._due_after_take.get(location_id)
            if due is None:
                due = await self._peek(location_id)
            while True:
                if due is not None:
                    if deadline is not None and due > deadline:
                        raise _limited((due - clock.now()).total_seconds())
                    # Until the moment the token falls due, not for the wait as it was
                    # learnt: the read's own round trip would be added to every wait.
                    left = (due - clock.now()).total_seconds()
                    if left > 0:
                        await clock.sleep(left)
                take = await self._take(location_id)
                self._due_after_take[location_id] = take.due
                if take.taken:
                    return
                due = take.due
        finally:
            queue.release()

    async def _enter(self, queue: asyncio.Lock, deadline: datetime | None) -> bool:
        """The location's queue taken, or False when `deadline` came first."""
        if deadline is None or not queue.locked():
            await queue.acquire()
            return True
        entered = asyncio.ensure_future(queue.acquire())
        left = max(0.0, (deadline - self._clock.now()).total_seconds())
        expired = asyncio.ensure_future(self._clock.sleep(left))
        waited = False
        try:
            await asyncio.wait({entered, expired}, return_when=asyncio.FIRST_COMPLETED)
            waited = True
        finally:
            expired.cancel()
            if not entered.done():
                entered.cancel()  # a cancelled `acquire` leaves the queue to the next in line
            await asyncio.gather(entered, expired, return_exceptions=True)
            if not waited and not entered.cancelled():
                queue.release()  # this taker was cancelled: the queue it got goes on
        return not entered.cancelled()

    async def pause(self, location_id: str, seconds: float) -> None:
        """The CRM refused with 429: nothing more for this location for `seconds`."""
        await self._db.run_write(self._pause, location_id, seconds)
        # The next taker reads when the pause ends instead of trying at the time known before.
        self._due_after_take.pop(location_id, None)

    def _pause(self, session: Session, location_id: str, seconds: float) -> None:
        tokens = -seconds * self.limit.rate  # refilled to zero exactly when the pause ends
        row = self._row(session, location_id)
        now = self._clock.now()
        left = row.tokens + max(0.0, (now - row.updated_at).total_seconds()) * self.limit.rate
        if left > tokens:  # never shortens a longer pause
            session.execute(
                update(CrmRateBucket)
                .where(CrmRateBucket.location_id == location_id)
                .values(tokens=tokens, updated_at=now)
            )

    async def _peek(self, location_id: str) -> datetime | None:
        """When the bucket will have a token (None: it has one now, or the location has no
        bucket yet), read without taking it or any lock."""
        now = self._clock.now()
        row = await self._db.run_read(_bucket, location_id)
        return None if row is None else self._due(row, now)

    async def _take(self, location_id: str) -> _Take:
        """Takes a token if the bucket has one."""
        return await self._db.run_write(self._take_in, location_id)

    def _take_in(self, session: Session, location_id: str) -> _Take:
        row = self._row(session, location_id)
        # Read with the bucket locked: no other taker's write is later than this.
        now = self._clock.now()
        due = self._due(row, now)
        if due is not None:
            return _Take(taken=False, due=due)
        # Only a taken token is written: the refill is computed from `updated_at`, so writing
        # an unchanged bucket would change nothing.
        at = self._taken_at(row, now)
        left = _Bucket(self._tokens(row, at) - 1.0, at)
        session.execute(
            _SET_BUCKET,
            {"b_location": location_id, "tokens": left.tokens, "updated_at": left.updated_at},
        )
        return _Take(taken=True, due=self._due(left, now) or now)

    def _due(self, row: _Bucket, now: datetime) -> datetime | None:
        """When the bucket has a token (None: it has one at `now`)."""
        tokens = self._tokens(row, now)
        if tokens >= 1.0:
            return None
        # Rounded up to the microsecond, the datetimes' resolution: rounded down, a token
        # a fraction of a microsecond away would fall due "now", and its taker would look
        # again at once, in a loop, instead of sleeping until it is there.
        wait_us = math.ceil((1.0 - tokens) / self.limit.rate * 1e6)
        return now + timedelta(microseconds=wait_us)

    def _tokens(self, row: _Bucket, at: datetime) -> float:
        elapsed = max(0.0, (at - row.updated_at).total_seconds())
        return min(self.limit.burst, row.tokens + elapsed * self.limit.rate)

    def _taken_at(self, row: _Bucket, now: datetime) -> datetime:
        """The moment a token taken at `now` is recorded at: `now`, or, when the bucket was
        already full, when it filled, but at most `ON_TIME` of a token's interval before
        `now`. The next token then falls due one interval after this one did, not after its
        taker came: a taker's delays do not slow the rate, and a take is never more than
        that share of an interval after its place on the rate's grid."""
        full_at = row.updated_at + timedelta(
            seconds=(self.limit.burst - row.tokens) / self.limit.rate
        )
        if now <= full_at:
            return now
        return max(full_at, now - timedelta(seconds=self.ON_TIME / self.limit.rate))

    def _row(self, session: Session, location_id: str) -> _Bucket:
        """The location's bucket, locked for this transaction; a full one when new."""
        parameters = {"b_location": location_id}
        row = session.execute(_BUCKET_LOCKED, parameters).first()
        if row is None:  # the location's first request: create its bucket (once)
            now = self._clock.now()
            bucket = {"location_id": location_id, "tokens": self.limit.burst, "updated_at": now}
            session.execute(_ADD_BUCKET[self._db.dialect], bucket)
            row = session.execute(_BUCKET_LOCKED, parameters).one()
        return _Bucket(float(row[0]), row[1])


@dataclass(frozen=True)
class _Bucket:
    tokens: float
    updated_at: datetime


@dataclass(frozen=True)
class _Take:
    """A take's outcome: whether it took a token, and when the bucket's next one falls due
    (after the one taken, or the one it waited for)."""

    taken: bool
    due: datetime


def _bucket(session: Session, location_id: str) -> _Bucket | None:
    """The location's bucket as it is, read without taking it or any lock."""
    row = session.execute(_BUCKET, {"b_location": location_id}).first()
    return None if row is None else _Bucket(float(row[0]), row[1])


def _limited(wait: float) -> CrmRateLimited:
    """The refusal of a token that cannot come within the wait; `wait`: how far ahead it is."""
    return CrmRateLimited(429, RATE_LIMITED, retryable=True, retry_after=wait)


class LocationGate:
    """One location's limiter, as the CRM transport uses it before each request of one job:
    its first request may be refused a token, the later ones wait for theirs."""

    def __init__(self, limiter: LocationRateLimiter, location_id: str) -> None:
        self._limiter = limiter
        self.location_id = location_id
        self._begun = False
        self._ahead = False  # a token taken by `take_first`, not yet used by a request

    async def acquire(self) -> None:
        """The token of the job's next request: the one `take_first` took, if it is unused."""
        if self._ahead:
            self._ahead = False
            return
        await self._limiter.acquire(self.location_id, patient=self._begun)
        self._begun = True

    async def take_first(self) -> None:
        """The job's first token, taken before its first request is even prepared (refused
        like any first one): a job the location cannot serve soon goes back to the outbox
        before it reads anything, and the jobs of a large claim prepare their requests at
        the CRM's pace, not all in the claim's loop turn."""
        await self.acquire()
        self._ahead = True

    async def pause(self, seconds: float | None) -> None:
        await self._limiter.pause(self.location_id, seconds or self._limiter.limit.window_s)
