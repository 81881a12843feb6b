"""INSERT ... ON CONFLICT, whose statement SQLAlchemy builds per dialect (SQLite's and
PostgreSQL's `insert` constructs): the one place domain code gets it from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert


def upsert(
    dialect: str,
    table: Table,
    values: Mapping[str, Any],
    *,
    key: Sequence[str],
    update: Sequence[str] = (),
) -> Insert:
    """`values` inserted into `table`, for the database named `dialect` (a SQLAlchemy dialect's
    name: "sqlite" or "postgresql"); where a row with the same `key` columns exists, its
    `update` columns set to the new values instead (nothing done when `update` is empty)."""
    keys = list(key)
    if dialect == "postgresql":
        pg = postgresql.insert(table).values(dict(values))
        if not update:
            return pg.on_conflict_do_nothing(index_elements=keys)
        return pg.on_conflict_do_update(
            index_elements=keys, set_={name: pg.excluded[name] for name in update}
        )
    lite = sqlite.insert(table).values(dict(values))
    if not update:
        return lite.on_conflict_do_nothing(index_elements=keys)
    return lite.on_conflict_do_update(
        index_elements=keys, set_={name: lite.excluded[name] for name in update}
    )
