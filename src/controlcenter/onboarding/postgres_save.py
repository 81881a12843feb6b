"""A save on PostgreSQL as one statement: one round trip instead of five or six.

The transaction `service.save_onboarding` runs on SQLite is BEGIN, the user's row, the brokerage
when it changes, the upsert, the jobs and COMMIT. On PostgreSQL each of those is a round trip
that waits for the server's process to be scheduled: on the shared 2-core bench machine a save
took 45 ms (median) from BEGIN to COMMIT, a lone one-statement transaction 23 ms
(BENCHMARKS.md). Here the same steps are one data-modifying statement sent on the driver's own
connection (`Database.write_driver`, autocommit: the statement is its own transaction), so the
record, the brokerage and the jobs still commit together or not at all, and the user's row is
still locked first (`FOR UPDATE`), which serialises concurrent saves of one user and keeps the
user from being deleted under the save. A user already gone matches no row: nothing is written
and no row is answered.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON, Table, inspect
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

from controlcenter.onboarding.models import RECORD, Onboarding
from controlcenter.onboarding.save_values import SaveValues
from controlcenter.outbox.models import OutboxJob

_DIALECT = PGDialect_asyncpg()  # type: ignore[no-untyped-call]  # SQLAlchemy's own
_RECORD_TABLE: Table = Onboarding.__table__  # type: ignore[assignment]  # declared as a Table
_JOBS_TABLE: Table = OutboxJob.__table__  # type: ignore[assignment]  # declared as a Table
_quote = _DIALECT.identifier_preparer.quote


def _column(name: str) -> str:
    """The quoted column of a record attribute (`userId` is `user_id`)."""
    return _quote(inspect(Onboarding).columns[name].name)


def _cast(table: Table, name: str, array: bool = False) -> str:
    return table.c[name].type.compile(dialect=_DIALECT) + ("[]" if array else "")


@lru_cache(maxsize=256)
def statement(given: tuple[str, ...], job_columns: tuple[str, ...]) -> str:
    """The save of the `given` fields. Parameters: $1 the user, $2 the brokerage to set (NULL:
    leave it), $3 now, $4 a new record's id, then the given values in order, then one array
    per column of the jobs (`job_columns`, those of `enqueue.job_values`). Answers the record's
    columns in `RECORD`'s order, or no row."""
    values = "".join(f", ${5 + i}::{_cast(_RECORD_TABLE, n)}" for i, n in enumerate(given))
    first_job = 5 + len(given)
    arrays = ", ".join(
        f"${first_job + i}::{_cast(_JOBS_TABLE, name, array=True)}"
        for i, name in enumerate(job_columns)
    )
    columns = ", ".join(_quote(name) for name in job_columns)
    changed = "".join(f"{_column(name)} = EXCLUDED.{_column(name)}, " for name in given)
    answered = ", ".join(_column(name) for name in RECORD)
    inserted = ", ".join(["id", "user_id", "created_at", "updated_at", *map(_column, given)])
    # Identifiers only come from the models; every value is a parameter.
    return f"""
WITH owner AS (
    SELECT id, brokerage FROM users WHERE id = $1::varchar FOR UPDATE
), renamed AS (
    UPDATE users SET brokerage = $2::varchar, updated_at = $3::timestamptz FROM owner
    WHERE users.id = owner.id AND $2::varchar IS NOT NULL
        AND owner.brokerage IS DISTINCT FROM $2::varchar
), saved AS (
    INSERT INTO onboarding ({inserted})
    SELECT $4::varchar, owner.id, $3::timestamptz, $3::timestamptz{values} FROM owner
    ON CONFLICT (user_id) DO UPDATE SET {changed}updated_at = EXCLUDED.updated_at
    RETURNING {answered}
), queued AS (
    INSERT INTO outbox_jobs ({columns})
    SELECT job.* FROM unnest({arrays}) AS job({columns}) WHERE EXISTS (SELECT FROM saved)
)
SELECT * FROM saved
"""  # noqa: S608


def parameters(save: SaveValues) -> list[Any]:
    """The parameters of `statement(tuple(save.values), tuple(save.jobs[0]))`, in its order."""
    arrays = [[_bound(name, job[name]) for job in save.jobs] for name in save.jobs[0]]
    return [save.user_id, save.brokerage, save.now, save.record_id, *save.values.values(), *arrays]


def _bound(column: str, value: Any) -> Any:
    """A job's value as the driver takes it: JSON columns as their text, as SQLAlchemy's JSON
    type sends them."""
    return json.dumps(value) if isinstance(_JOBS_TABLE.c[column].type, JSON) else value
