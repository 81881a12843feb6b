"""INSERT ... ON CONFLICT, whose statement SQLAlchemy builds per dialect (SQLite's and
PostgreSQL's `insert` constructs): the one place domain code gets it from."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

DIALECTS = ("sqlite", "postgresql")  # the SQLAlchemy dialects' names of the service's databases


def upsert(dialect: str, table: Table, *, key: Sequence[str], update: Sequence[str] = ()) -> Insert:
    """An insert into `table` for the database named `dialect` (one of `DIALECTS`); where a
    row with the same `key` columns exists, its `update` columns are set to the new values
    instead (nothing is done when `update` is empty).

    The values are the parameters it is executed with, as for any insert: a caller builds
    its statement once and keeps it, as the service's other statements are kept (each new one
    is built, its `excluded` alias included, and its cache key worked out again), and
    SQLAlchemy compiles it once per set of columns given."""
    keys = list(key)
    if dialect == "postgresql":
        pg = postgresql.insert(table)
        if not update:
            return pg.on_conflict_do_nothing(index_elements=keys)
        return pg.on_conflict_do_update(
            index_elements=keys, set_={name: pg.excluded[name] for name in update}
        )
    lite = sqlite.insert(table)
    if not update:
        return lite.on_conflict_do_nothing(index_elements=keys)
    return lite.on_conflict_do_update(
        index_elements=keys, set_={name: lite.excluded[name] for name in update}
    )
