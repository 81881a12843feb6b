"""The one keyset rule of every list ordered newest first by (created_at, id): the page after
the item a cursor names. The cursor's encoding is HTTP's (`web.pagination.Cursor`); storage
takes the item's creation time and id."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute, Session


class Keyed(Protocol):
    created_at: datetime
    id: str


Row = TypeVar("Row", bound=Keyed)


def newest_first(
    session: Session,
    query: Select[Row],
    created_at: InstrumentedAttribute[datetime],
    id_: InstrumentedAttribute[str],
    *,
    limit: int,
    after: tuple[datetime, str] | None,
) -> tuple[list[Row], bool]:
    """Up to `limit` rows of `query` after the item `after` names (its creation time and id),
    newest first, and whether more follow."""
    if after is not None:
        after_created_at, after_id = after
        query = query.where(
            or_(
                created_at < after_created_at,
                and_(created_at == after_created_at, id_ < after_id),
            )
        )
    query = query.order_by(created_at.desc(), id_.desc()).limit(limit + 1)
    rows: list[Any] = list(session.scalars(query))
    return rows[:limit], len(rows) > limit
