"""Read and upsert a user's onboarding record, with its side effects as outbox jobs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cachetools import LRUCache, cached
from sqlalchemy import Row, Table, bindparam, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import ReturningInsert

from controlcenter.auth.models import UserRecord
from controlcenter.db import Database, new_id, utcnow
from controlcenter.db.upserts import upsert
from controlcenter.onboarding.crm_sync import SYNC_USER, TAG_HIGH_GCI, TAG_ONBOARDING_COMPLETE
from controlcenter.onboarding.models import ARRAY_FIELDS, FIELDS, RECORD, RECORD_COLUMNS, Onboarding
from controlcenter.onboarding.schemas import OnboardingInput
from controlcenter.outbox.enqueue import Job, PendingJob, enqueue, pending

HIGH_GCI_MARKERS = ("100", "250")
# The upserts kept, one for each set of fields saved: clients send one or a few sets.
UPSERTS_KEPT = 64
_TABLE: Table = Onboarding.__table__  # type: ignore[assignment]  # declared as a Table
_USERS: Table = UserRecord.__table__  # type: ignore[assignment]  # declared as a Table
# The save's statement on the user, built once (bound parameters), as Core: it sets the brokerage
# only where it changes, so `users.updated_at` moves only then, without reading the row first.
_SET_BROKERAGE = (
    update(_USERS)
    .where(_USERS.c.id == bindparam("b_id"))
    .where(_USERS.c.brokerage.is_distinct_from(bindparam("b_brokerage")))
    .values(brokerage=bindparam("b_brokerage"), updated_at=bindparam("b_now"))
)
_RECORD_OF = select(*RECORD_COLUMNS).where(_TABLE.c.user_id == bindparam("user_id"))

StoredRecord = dict[str, Any]  # the record's stored values by `RECORD`'s names


@cached(LRUCache(maxsize=UPSERTS_KEPT))
def _upsert_of(dialect: str, given: tuple[str, ...]) -> ReturningInsert[Any]:
    """The save's upsert when the columns `given` are: it updates them and `updated_at`, and
    returns the record. Built once for each set of fields a client sends, on the event loop
    (the cache takes no lock)."""
    return upsert(dialect, _TABLE, key=("user_id",), update=(*given, "updated_at")).returning(
        *RECORD_COLUMNS
    )


class UserGoneError(Exception):
    """The session's user was deleted between authentication and the write."""


async def get_onboarding(db: Database, user_id: str) -> StoredRecord | None:
    row = await db.run_read(_read_record, user_id)
    return dict(zip(RECORD, row, strict=True)) if row is not None else None


def _read_record(session: Session, user_id: str) -> Row[Any] | None:
    return session.connection().execute(_RECORD_OF, {"user_id": user_id}).first()


def encode_array(values: list[str]) -> str:
    # Compact, non-ASCII kept: the same text JSON.stringify() produces.
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))


def is_high_gci(gci: str) -> bool:
    return any(marker in gci for marker in HIGH_GCI_MARKERS)


def _stored_values(data: OnboardingInput) -> dict[str, Any]:
    """The given fields by column, in their stored form (arrays as JSON text)."""
    given: Mapping[str, object] = data
    values: dict[str, Any] = {}
    for name in FIELDS:
        if name in given:
            value = given[name]
            if name in ARRAY_FIELDS:
                assert isinstance(value, list)
                value = encode_array(value)
            values[_TABLE.c[name].name] = value
    return values


class OnboardingSaves:
    """The saves of POST /api/v1/onboarding.

    Each save creates or updates the record with the given fields only, in one transaction:
    the brokerage (when given and changed), the record and the outbox jobs commit together or
    not at all. Nothing is read first: the record's foreign key refuses a user deleted before
    the save (UserGoneError), and on PostgreSQL its check holds the user's row until the commit,
    so the user cannot be deleted under the save; concurrent saves of one user meet in the
    upsert, which creates one record. On SQLite the transaction holds the database's one write
    lock from its first statement, so it runs as few statements as it can.
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    async def save(self, user_id: str, data: OnboardingInput) -> StoredRecord:
        """The stored record; UserGoneError (nothing written) when the user is gone."""
        values = _stored_values(data)
        brokerage = data.get("brokerageName")
        now = utcnow()
        # Everything that needs no database is built before the transaction: on SQLite it holds
        # the database's one write lock.
        new = {"id": new_id(), "user_id": user_id, "created_at": now, "updated_at": now}
        upsert_record = _upsert_of(self._db.dialect, tuple(values))
        jobs = pending(*_jobs(user_id, data.get("gciLast12Months", "")))
        set_brokerage = (
            {"b_id": user_id, "b_brokerage": brokerage, "b_now": now}
            if brokerage  # only a non-empty name sets it
            else None
        )
        row = await self._db.run_write(
            _save, user_id, set_brokerage, upsert_record, {**new, **values}, jobs
        )
        return dict(zip(RECORD, row, strict=True))


def _save(
    session: Session,
    user_id: str,
    set_brokerage: dict[str, Any] | None,
    upsert_record: ReturningInsert[Any],
    record: dict[str, Any],
    jobs: list[PendingJob],
) -> Row[Any]:
    """The save's one transaction: the brokerage (`_SET_BROKERAGE`'s parameters, None to leave
    it), the record (`upsert_record` with the `record`'s values, whose row it returns) and the
    jobs."""
    connection = session.connection()
    if set_brokerage is not None:
        connection.execute(_SET_BROKERAGE, set_brokerage)
    try:
        row = connection.execute(upsert_record, record).one()
    except IntegrityError as exc:
        # The only constraint the upsert can break: `user_id` names no user.
        raise UserGoneError(user_id) from exc
    # No credential kept in memory holds the brokerage (those who show it read the row), so a
    # save forgets none of them.
    enqueue(session, jobs)
    return row


def _jobs(user_id: str, gci: str) -> list[Job]:
    """A save's side effects; the high-GCI tag judged on the request's value (empty when
    absent), not the stored one."""
    return [
        (TAG_ONBOARDING_COMPLETE, {"userId": user_id}),
        *([(TAG_HIGH_GCI, {"userId": user_id, "gci": gci})] if is_high_gci(gci) else []),
        (SYNC_USER, {"userId": user_id}),
    ]
