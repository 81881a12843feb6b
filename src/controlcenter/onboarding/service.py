"""Read and upsert a user's onboarding record, with its side effects as outbox jobs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Column, Insert, Table, bindparam, inspect, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from controlcenter.auth.models import User
from controlcenter.db import Database, new_id, utcnow
from controlcenter.db.lookups import Lookup
from controlcenter.onboarding import postgres_save
from controlcenter.onboarding.crm_sync import SYNC_USER, TAG_HIGH_GCI, TAG_ONBOARDING_COMPLETE
from controlcenter.onboarding.models import ARRAY_FIELDS, FIELDS, RECORD, Onboarding
from controlcenter.onboarding.schemas import OnboardingInput
from controlcenter.outbox.enqueue import enqueue_all, job_values

HIGH_GCI_MARKERS = ("100", "250")
_TABLE: Table = Onboarding.__table__  # type: ignore[assignment]  # declared as a Table
# Built once: a statement built per call costs more Python than running it (SQLAlchemy builds
# its cache key and, for ON CONFLICT, the `excluded` columns again each time).
_USER = select(User.brokerage).where(User.id == bindparam("user_id"))
_SET_BROKERAGE = (
    update(User).where(User.id == bindparam("user_id")).values(brokerage=bindparam("brokerage"))
)
# The read and the upsert answer the record's columns in `RECORD`'s order, so the answer is built
# from the row as it comes: no ORM object, whose instrumented attributes cost more than the row.
_COLUMNS: tuple[Column[Any], ...] = tuple(inspect(Onboarding).columns[name] for name in RECORD)
# A per-request read, like the session check before it: compiled once, on the lookups' own
# connections (`db.lookups`), not a session and a pooled connection.
_READ = Lookup(select(*_COLUMNS).where(_TABLE.c.user_id == bindparam("user_id")))

StoredRecord = dict[str, Any]  # the record's stored values by `RECORD`'s names


class UserGoneError(Exception):
    """The session's user was deleted between authentication and the write."""


async def get_onboarding(db: Database, user_id: str) -> StoredRecord | None:
    row = await db.lookup(_READ, user_id=user_id)
    return dict(zip(RECORD, row, strict=True)) if row is not None else None


def encode_array(values: list[str]) -> str:
    # Compact, non-ASCII kept: the same text JSON.stringify() produces.
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))


def is_high_gci(gci: str) -> bool:
    return any(marker in gci for marker in HIGH_GCI_MARKERS)


async def save_onboarding(db: Database, user_id: str, data: OnboardingInput) -> StoredRecord:
    """Create or update the record with the given fields only, all in one transaction.

    The record, the user's brokerage and the outbox jobs commit together or not at all.

    Everything that needs no database (the stored values, the jobs, the statements) is built
    before the transaction begins, and the transaction is three or four Core statements on its
    connection, not ORM objects and a unit-of-work flush: on SQLite it holds the database's one
    write lock, which every other save and the outbox worker wait for (docs/onboarding-settings.md).
    """
    given: Mapping[str, object] = data
    now = utcnow()
    values: dict[str, Any] = {}
    for name in FIELDS:
        if name in given:
            value = given[name]
            if name in ARRAY_FIELDS:
                assert isinstance(value, list)
                value = encode_array(value)
            values[name] = value
    brokerage = data.get("brokerageName")
    # SPEC 4.4: judged on the request's value, "empty when absent", not the stored one.
    gci = data.get("gciLast12Months", "")
    jobs = [job_values(TAG_ONBOARDING_COMPLETE, {"userId": user_id}, now)]
    if is_high_gci(gci):
        jobs.append(job_values(TAG_HIGH_GCI, {"userId": user_id, "gci": gci}, now))
    jobs.append(job_values(SYNC_USER, {"userId": user_id}, now))
    record_id = new_id()
    if db.is_sqlite:
        row = await _save_sqlite(db, user_id, brokerage, record_id, now, values, jobs)
    else:
        async with db.write_driver() as driver:
            sql = postgres_save.statement(tuple(values), tuple(jobs[0]))
            arguments = postgres_save.parameters(
                user_id, brokerage or None, now, record_id, values, jobs
            )
            row = await driver.fetchrow(sql, *arguments)
    if row is None:
        raise UserGoneError(user_id)
    return dict(zip(RECORD, row, strict=True))


async def _save_sqlite(
    db: Database,
    user_id: str,
    brokerage: str | None,
    record_id: str,
    now: datetime,
    values: dict[str, Any],
    jobs: list[dict[str, Any]],
) -> Sequence[Any] | None:
    """The save as a transaction of three or four statements (SQLite writes are serialised, so
    the user's row needs no lock); the record's row, or None when the user is gone."""
    record = {"id": record_id, "user_id": user_id, "created_at": now, "updated_at": now, **values}
    async with db.write() as session:
        connection = await session.connection()
        user = (await connection.execute(_USER, {"user_id": user_id})).first()
        if user is None:
            return None
        if brokerage and user.brokerage != brokerage:
            # Only a change is written (as the ORM did), so `updated_at` moves only then.
            await connection.execute(_SET_BROKERAGE, {"user_id": user_id, "brokerage": brokerage})
        row = (await connection.execute(_upsert(tuple(values)), record)).one()
        # A save is an event (it tags and syncs the user) even when no answer changed.
        await enqueue_all(connection, jobs)
    return row


@lru_cache(maxsize=256)
def _upsert(given: tuple[str, ...]) -> Insert:
    """One statement that creates the user's record or updates the `given` fields (and
    `updated_at`) of the existing one, answering the whole record. `id` and `created_at` are
    kept on update; concurrent first saves end in one record (the unique `user_id`). Kept per
    set of given fields (a form sends the same few sets); the values are bound parameters."""
    columns = ("id", "user_id", "created_at", "updated_at", *given)
    statement = sqlite_insert(_TABLE).values({name: bindparam(name) for name in columns})
    changed = {name: statement.excluded[name] for name in given}
    return statement.on_conflict_do_update(
        index_elements=[_TABLE.c.user_id],
        set_={**changed, "updated_at": statement.excluded.updated_at},
    ).returning(*_COLUMNS)
