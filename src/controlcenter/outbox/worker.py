"""The outbox worker: claims due jobs, delivers them outside any transaction, records the outcome.

Claiming. A job is due when it is pending, its `next_attempt_at` has come and it is not leased
(`locked_until` empty or past). The claim sets a lease in one short transaction: on PostgreSQL
the rows are taken with SELECT ... FOR UPDATE SKIP LOCKED, so concurrent workers pass over each
other's rows instead of waiting or taking them twice; on SQLite the transaction starts with
BEGIN IMMEDIATE (Database.run_write), which serialises claims across processes. A worker that
dies leaves its lease behind; when it expires (20 s at most) any worker reclaims the job.
Deliveries are idempotent (contacts are upserted by e-mail, tags are added to a set), so the
rare second delivery after a lost lease changes nothing at the CRM. After a claim that found
nothing, the worker reads whether any job is due before it claims again, so an idle worker
takes no write transaction every poll.

Delivering. Each claimed job runs in its own task, at most `outbox_concurrency` at a time, with
a timeout (`outbox_delivery_timeout_s`); its lease is renewed while it runs (`outbox.lease`), so
the lease can be short: a job whose process died is taken again within the lease and a poll.
No database transaction is open while the CRM is called, so HTTP requests never wait for the
CRM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, Update, bindparam, or_, select, update
from sqlalchemy.orm import Session
from structlog.contextvars import bound_contextvars

from controlcenter.common.logs import get_logger
from controlcenter.common.retry import backoff_delay
from controlcenter.config import Config
from controlcenter.db import Database, utcnow
from controlcenter.outbox.enqueue import REQUEST_ID
from controlcenter.outbox.errors import DeliveryError, MissingSettings, PermanentError
from controlcenter.outbox.lease import LeaseLostError, Leases
from controlcenter.outbox.models import DEAD, DONE, PENDING, OutboxJob

log = get_logger(__name__)

# Longest stored `last_error`: enough for any CRM message, bounded against a huge body.
_MAX_ERROR_CHARS = 2000


@dataclass
class ClaimedJob:
    """A snapshot of a job taken at claim time; `lease` identifies this claim (renewed while
    the job is delivered: `outbox.lease`)."""

    id: str
    kind: str
    payload: dict[str, Any]
    attempts: int
    created_at: datetime
    lease: datetime


Handler = Callable[[ClaimedJob], Awaitable[None]]

# The claim's statements, built once (bound parameters; see `OutboxWorker.claim`). FOR UPDATE
# SKIP LOCKED is PostgreSQL's; SQLAlchemy's SQLite dialect leaves it out, and there the write
# transaction's BEGIN IMMEDIATE serialises the claims.
_IS_DUE = (
    OutboxJob.status == PENDING,
    OutboxJob.kind.not_in(bindparam("b_held", expanding=True)),
    OutboxJob.next_attempt_at <= bindparam("b_now"),
    or_(OutboxJob.locked_until.is_(None), OutboxJob.locked_until <= bindparam("b_now")),
)
_DUE = (
    select(
        OutboxJob.id,
        OutboxJob.kind,
        OutboxJob.payload,
        OutboxJob.attempts,
        OutboxJob.created_at,
        OutboxJob.next_attempt_at,
    )
    .where(*_IS_DUE)
    .order_by(OutboxJob.next_attempt_at, OutboxJob.id)
    .limit(bindparam("b_limit"))
    .with_for_update(skip_locked=True)
)
# Whether any job is due, read without a transaction: what an idle worker asks before it
# claims (`OutboxWorker.run`).
_ANY_DUE = select(OutboxJob.id).where(*_IS_DUE).limit(1)
_LEASE = (
    update(OutboxJob)
    .where(OutboxJob.id.in_(bindparam("b_ids", expanding=True)))
    .values(locked_until=bindparam("b_lease"))
)
# Every pending job that is not being delivered made due now (`OutboxWorker.run`): what it
# waits for (its settings; a fixed token or location after a failure) may have come.
_DUE_NOW = (
    update(OutboxJob)
    .where(
        OutboxJob.status == PENDING,
        OutboxJob.next_attempt_at > bindparam("b_now"),
        or_(OutboxJob.locked_until.is_(None), OutboxJob.locked_until <= bindparam("b_now")),
    )
    .values(next_attempt_at=bindparam("b_now"))
)
# A cancelled delivery's job given back, unless another worker holds it by now.
_RELEASE = (
    update(OutboxJob)
    .where(OutboxJob.id == bindparam("b_id"), OutboxJob.locked_until == bindparam("b_lease"))
    .values(locked_until=None)
)


class OutboxWorker:
    def __init__(
        self,
        db: Database,
        config: Config,
        handlers: Mapping[str, Handler],
        *,
        name: str = "worker",
        wake_on: Iterable[str] = (),
    ) -> None:
        """`wake_on`: the change topics (`db.changes`) whose change makes every waiting job due
        at once, a change made by any process included: the settings its deliveries read."""
        self._db = db
        self._config = config
        self._handlers = dict(handlers)
        self._name = name
        self._wake_on = tuple(wake_on)
        self._stopping = asyncio.Event()
        self._inflight: dict[asyncio.Task[None], ClaimedJob] = {}
        self._leases = Leases(db, config.outbox_lease_s)
        # Jobs seen waiting for settings, with why: logged when they start and stop waiting,
        # not on every recheck.
        self._waiting: dict[str, str] = {}
        # Set by a change of a `wake_on` topic, and by stop(): what ends a wait early.
        self._wake = asyncio.Event()
        self._wakes = 0  # how many changes of `wake_on` topics this worker has seen
        # Kinds whose jobs wait for settings, each until its recheck (loop time): not claimed
        # meanwhile, since each would wait in turn, at a claim, an outcome and a log line each.
        self._held: dict[str, float] = {}

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Deliver due jobs until stop() is called."""
        log.info("outbox worker started", worker=self._name)
        # After a claim that found nothing, the next polls read whether anything is due
        # before they claim: a claim is a write transaction (on SQLite the process's write
        # turn and the database's one write lock), a read takes neither, and an idle worker
        # would otherwise take them every poll.
        found_nothing = False
        reactions = [self._db.changes.react(t, self._waiting_may_go) for t in self._wake_on]
        try:
            while not self._stopping.is_set():
                if self._wake.is_set():
                    self._wake.clear()
                    await self._make_due_safely()
                    found_nothing = False
                free = self._config.outbox_concurrency - len(self._inflight)
                claimed: list[ClaimedJob] = []
                if free > 0 and (not found_nothing or await self._due_safely()):
                    claimed = await self._claim_safely(free)
                    found_nothing = not claimed
                for job in claimed:
                    self._start(job)
                if claimed and len(claimed) == free:
                    # Possibly more due: claim again as soon as a slot frees up.
                    await self._wait(for_slot=True)
                elif claimed:
                    continue
                else:
                    await self._wait(for_slot=free <= 0)
        finally:
            for end_reaction in reactions:
                end_reaction()
            await self._drain()
            await self._leases.close()
            log.info("outbox worker stopped", worker=self._name)

    async def stop(self) -> None:
        """Ask run() to finish: no new claims; in-flight deliveries get a grace period."""
        self._stopping.set()
        self._wake.set()

    async def run_once(self) -> int:
        """Claim what is due now, deliver it and wait for the outcomes; the number claimed."""
        claimed = await self._claim_safely(self._config.outbox_concurrency)
        await asyncio.gather(*(self._deliver(job) for job in claimed))
        return len(claimed)

    def _waiting_may_go(self) -> None:
        self._wakes += 1
        self._held.clear()
        self._wake.set()

    def _held_kinds(self) -> list[str]:
        """The kinds held back now; a hold whose recheck has come is dropped."""
        now = asyncio.get_running_loop().time()
        self._held = {kind: until for kind, until in self._held.items() if until > now}
        return list(self._held)

    async def _make_due_safely(self) -> None:
        try:
            await self._db.run_write(_due_now, utcnow())
        except Exception:
            # They keep their times: delayed until the recheck or their backoff, not lost.
            log.exception("outbox could not make the waiting jobs due", worker=self._name)

    def _start(self, job: ClaimedJob) -> None:
        task = asyncio.create_task(self._deliver(job), name=f"outbox-{job.id}")
        self._inflight[task] = job
        task.add_done_callback(self._inflight.pop)

    async def _wait(self, *, for_slot: bool) -> None:
        """Sleep one poll interval, or less: until stop(), a change of a `wake_on` topic,
        or a free slot when `for_slot`."""
        timeout = self._config.outbox_poll_interval_s
        wake = asyncio.create_task(self._wake.wait())
        waiters: set[asyncio.Future[Any]] = {wake}
        if for_slot:
            waiters.update(self._inflight)
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            wake.cancel()

    async def _drain(self) -> None:
        """Let deliveries in flight finish; cancel the stragglers and release their leases."""
        if not self._inflight:
            return
        tasks = list(self._inflight)
        jobs = [self._inflight[task] for task in tasks]
        _, pending = await asyncio.wait(tasks, timeout=self._config.outbox_shutdown_grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        unfinished = [job for task, job in zip(tasks, jobs, strict=True) if task in pending]
        if unfinished:
            await self._release(unfinished)

    async def _release(self, jobs: list[ClaimedJob]) -> None:
        """Give cancelled jobs back at once instead of making others wait for the lease."""
        try:
            await self._db.run_write(_release, [{"b_id": j.id, "b_lease": j.lease} for j in jobs])
        except Exception:
            log.exception("outbox could not release its claims; they expire with the lease")
        else:
            log.info("outbox released unfinished jobs", count=len(jobs), worker=self._name)

    # -- claiming ----------------------------------------------------------------------------

    async def _claim_safely(self, limit: int) -> list[ClaimedJob]:
        try:
            return await self.claim(limit)
        except Exception:
            # The database may be briefly unavailable; the loop tries again after the poll.
            log.exception("outbox claim failed", worker=self._name)
            return []

    async def _due_safely(self) -> bool:
        """Whether any job is due now; True when the database cannot say (the claim that
        follows then logs what failed)."""
        try:
            return await self._db.run_read(_any_due, utcnow(), self._held_kinds())
        except Exception:
            return True

    async def claim(self, limit: int) -> list[ClaimedJob]:
        """Lease up to `limit` due jobs, oldest due first, in one short transaction.

        Two Core statements (read the due jobs' columns, then lease them all in one UPDATE),
        not ORM objects and an UPDATE per row: on SQLite the claim holds the database's one
        write lock, during which every request that writes waits, so it is kept as short as
        two statements make it (docs/outbox.md).
        """
        if limit <= 0:
            return []
        now = utcnow()
        lease = now + timedelta(seconds=self._config.outbox_lease_s)
        rows = await self._db.run_write(_claim, now, limit, lease, self._held_kinds())
        return [
            ClaimedJob(
                id=row.id,
                kind=row.kind,
                payload=dict(row.payload),
                attempts=row.attempts,
                created_at=row.created_at,
                lease=lease,
            )
            for row in rows
        ]

    # -- delivering --------------------------------------------------------------------------

    async def _deliver(self, job: ClaimedJob) -> None:
        request_id = job.payload.get(REQUEST_ID)
        if not isinstance(request_id, str):
            await self._deliver_job(job)
            return
        with bound_contextvars(request_id=request_id):
            await self._deliver_job(job)

    async def _deliver_job(self, job: ClaimedJob) -> None:
        fields = {"job_id": job.id, "kind": job.kind, "worker": self._name}
        handler = self._handlers.get(job.kind)
        waiting = False
        wakes = self._wakes
        try:
            if handler is None:
                raise PermanentError(f"unknown job kind {job.kind!r}")
            async with (
                asyncio.timeout(self._config.outbox_delivery_timeout_s),
                self._leases.kept(job),
            ):
                await handler(job)
        except LeaseLostError:
            return  # another worker holds the job now; its outcome is the one recorded
        except MissingSettings as exc:
            waiting = True
            # Settings saved while it ran may be the ones it lacked (it may have read them
            # before): it is due again at once, as the jobs the change made due.
            retry_in = self._config.outbox_settings_recheck_s if wakes == self._wakes else 0.0
            if retry_in:
                self._held[job.kind] = asyncio.get_running_loop().time() + retry_in
            if self._waiting.get(job.id) != str(exc):
                self._waiting[job.id] = str(exc)
                log.warning(
                    "outbox job waits for settings",
                    missing=list(exc.names),
                    problem=str(exc),
                    retry_in_s=retry_in,
                    **fields,
                )
            await self._finish(
                job,
                next_attempt_at=utcnow() + timedelta(seconds=retry_in),
                last_error=str(exc),
            )
        except PermanentError as exc:
            log.error("outbox job dead: cannot be delivered", error=str(exc), **fields)
            await self._finish(job, status=DEAD, attempts=job.attempts + 1, last_error=str(exc))
        except DeliveryError as exc:
            if exc.rate_limited:
                await self._rate_limited(job, exc, fields=fields)
            else:
                await self._failed(job, exc.message, retryable=exc.retryable, fields=fields)
        except TimeoutError:
            await self._failed(job, "delivery timed out", retryable=True, fields=fields)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # A bug, not the CRM: keep the traceback for operators, retry like any failure.
            log.exception("outbox delivery raised", **fields)
            await self._failed(job, f"{type(exc).__name__}: {exc}", retryable=True, fields=fields)
        else:
            log.info("outbox job delivered", attempts=job.attempts + 1, **fields)
            await self._finish(
                job,
                status=DONE,
                attempts=job.attempts + 1,
                delivered_at=utcnow(),
                last_error=None,
            )
        if not waiting and self._waiting.pop(job.id, None) is not None:
            log.info("outbox job stops waiting for settings", **fields)

    async def _rate_limited(
        self, job: ClaimedJob, exc: DeliveryError, *, fields: dict[str, Any]
    ) -> None:
        """The CRM's rate limit held the job back: it comes back when the location has room
        again, and the wait is not an attempt (nothing was refused)."""
        wait = exc.retry_after or 0.0
        log.info("outbox job waits for the CRM's rate limit", retry_in_s=round(wait, 3), **fields)
        # From when the CRM said so, not from now: the wait it asked for has begun then.
        await self._finish(
            job, next_attempt_at=exc.raised_at + timedelta(seconds=wait), last_error=exc.message
        )

    async def _failed(
        self, job: ClaimedJob, message: str, *, retryable: bool, fields: dict[str, Any]
    ) -> None:
        attempts = job.attempts + 1
        now = utcnow()
        age = (now - job.created_at).total_seconds()
        if age >= self._config.outbox_max_age_s:
            log.error(
                "outbox job dead: retried past its maximum age",
                attempts=attempts,
                error=message,
                age_s=round(age, 3),
                **fields,
            )
            await self._finish(job, status=DEAD, attempts=attempts, last_error=message)
            return
        delay = backoff_delay(
            attempts,
            base_s=self._config.outbox_base_backoff_s,
            cap_s=self._config.outbox_max_backoff_s,
        )
        log.warning(
            "outbox delivery failed, will retry",
            attempts=attempts,
            error=message,
            retryable=retryable,
            retry_in_s=round(delay, 3),
            **fields,
        )
        await self._finish(
            job,
            attempts=attempts,
            next_attempt_at=now + timedelta(seconds=delay),
            last_error=message,
        )

    async def _finish(self, job: ClaimedJob, **values: Any) -> None:
        """Record the outcome and drop the lease, unless the lease was lost meanwhile."""
        if values.get("last_error"):
            values["last_error"] = values["last_error"][:_MAX_ERROR_CHARS]
        values["locked_until"] = None
        statement = (
            update(OutboxJob)
            .where(OutboxJob.id == job.id, OutboxJob.locked_until == job.lease)
            .values(**values)
        )
        try:
            saved = await self._db.run_write(_rowcount, statement)
        except Exception:
            # The job keeps its lease and is reclaimed when it expires: delayed, not lost.
            log.exception("outbox could not save a job's outcome", job_id=job.id)
            return
        if saved == 0:
            # Another worker reclaimed the job after our lease ran out: its outcome wins.
            log.warning("outbox lease lost before the outcome was saved", job_id=job.id)


def _claim(
    session: Session, now: datetime, limit: int, lease: datetime, held: list[str]
) -> list[Row[Any]]:
    """The due jobs' columns (none of a `held` kind), each leased until `lease`."""
    connection = session.connection()
    params = {"b_now": now, "b_limit": limit, "b_held": held}
    rows = list(connection.execute(_DUE, params).all())
    if rows:
        connection.execute(_LEASE, {"b_ids": [row.id for row in rows], "b_lease": lease})
    return rows


def _any_due(session: Session, now: datetime, held: list[str]) -> bool:
    params = {"b_now": now, "b_held": held}
    return session.connection().execute(_ANY_DUE, params).first() is not None


def _due_now(session: Session, now: datetime) -> None:
    session.connection().execute(_DUE_NOW, {"b_now": now})


def _release(session: Session, leases: list[dict[str, Any]]) -> None:
    session.connection().execute(_RELEASE, leases)


def _rowcount(session: Session, statement: Update) -> int:
    return session.connection().execute(statement).rowcount
