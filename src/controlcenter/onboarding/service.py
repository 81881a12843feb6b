"""Read and upsert a user's onboarding record, with its side effects as outbox jobs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table, bindparam, select

from controlcenter.db import Database, new_id, utcnow
from controlcenter.db.group_commit import GroupCommit
from controlcenter.db.lookups import Lookup
from controlcenter.onboarding import postgres_save, sqlite_save
from controlcenter.onboarding.crm_sync import SYNC_USER, TAG_HIGH_GCI, TAG_ONBOARDING_COMPLETE
from controlcenter.onboarding.models import ARRAY_FIELDS, FIELDS, RECORD, RECORD_COLUMNS, Onboarding
from controlcenter.onboarding.save_values import SaveValues
from controlcenter.onboarding.schemas import OnboardingInput
from controlcenter.outbox.enqueue import job_values

HIGH_GCI_MARKERS = ("100", "250")
_TABLE: Table = Onboarding.__table__  # type: ignore[assignment]  # declared as a Table
# The read and the upsert answer `RECORD_COLUMNS`, so the answer is built from the row as it
# comes: no ORM object, whose instrumented attributes cost more than the row. The read is a
# per-request one, like the session check before it: compiled once, on the lookups' own
# connections (`db.lookups`), not a session and a pooled connection.
_READ = Lookup(select(*RECORD_COLUMNS).where(_TABLE.c.user_id == bindparam("user_id")))

StoredRecord = dict[str, Any]  # the record's stored values by `RECORD`'s names
Row = Sequence[Any]  # a record's row as the driver answers it, in `RECORD`'s order


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


def _save_values(user_id: str, data: OnboardingInput) -> SaveValues:
    """Everything a save writes, built before its transaction opens."""
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
    return SaveValues(user_id, brokerage or None, now, new_id(), values, jobs)


async def _save_all_sqlite(driver: Any, saves: Sequence[SaveValues]) -> list[Row | None]:
    return [await sqlite_save.save(driver, save) for save in saves]


class OnboardingSaves:
    """The saves of a process's requests (POST /api/v1/onboarding).

    Each save creates or updates the record with the given fields only, in one transaction:
    the record, the user's brokerage and the outbox jobs commit together or not at all.
    Everything that needs no database (the stored values, the jobs, the statements) is built
    before the transaction begins, and the transaction runs in the driver's SQL on the driver's
    own connection, without SQLAlchemy's session and statement objects
    (docs/onboarding-settings.md).

    SQLite (`sqlite_save`): the transaction holds the database's one write lock, which every
    other save, of this process or another, waits for, so saves arriving together took their
    turns one after the other and 16 at once kept one core of two busy. The saves that arrive
    while one transaction is being written go together in the next (`GroupCommit`: a lone
    save still goes at once, alone), each as its own statements; a shared transaction that
    fails is tried again one save at a time, so a save fails only for itself.
    PostgreSQL (`postgres_save`): each save is one statement in autocommit, one round trip, on a
    connection of its own: saves arriving together run side by side.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._grouped: GroupCommit[SaveValues, Row | None] = GroupCommit(
            db, _save_all_sqlite, "onboarding-saves", driver=True
        )

    async def save(self, user_id: str, data: OnboardingInput) -> StoredRecord:
        """The stored record; UserGoneError (nothing written) when the user is gone."""
        save = _save_values(user_id, data)
        if self._db.is_sqlite:
            row = await self._grouped.submit(save)
        else:
            async with self._db.write_driver() as driver:
                sql = postgres_save.statement(tuple(save.values), tuple(save.jobs[0]))
                row = await driver.fetchrow(sql, *postgres_save.parameters(save))
        if row is None:
            raise UserGoneError(user_id)
        return dict(zip(RECORD, row, strict=True))
