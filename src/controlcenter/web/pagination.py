"""Keyset cursors for lists ordered newest first by (created_at, id), and the page of such a
list after a cursor (`newest_first`): the one keyset rule every such list follows.

A cursor names the last item of a page, so it stays valid while items are added or removed:
the next page starts right after that item, wherever it now is. It is opaque to clients
(base64url of JSON), and a cursor that does not decode is the client's error.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy import Select, and_, or_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
INVALID_CURSOR = "Invalid cursor"
CURSOR_PATTERN = "^[A-Za-z0-9_-]*$"
"""The alphabet of every list's cursor (unpadded URL-safe base64: `Cursor.encode`'s and the user
list's), for the interface description."""


class InvalidCursorError(ValueError):
    pass


@dataclass(frozen=True)
class Cursor:
    created_at: datetime
    id: str

    def encode(self) -> str:
        raw = json.dumps([self.created_at.isoformat(), self.id], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, value: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
            created_at, item_id = json.loads(raw)
            moment = datetime.fromisoformat(created_at)
        except (binascii.Error, ValueError, TypeError, UnicodeDecodeError) as exc:
            raise InvalidCursorError(INVALID_CURSOR) from exc
        if not isinstance(item_id, str) or moment.tzinfo is None:
            raise InvalidCursorError(INVALID_CURSOR)
        return cls(created_at=moment, id=item_id)


class Keyed(Protocol):
    created_at: datetime
    id: str


Row = TypeVar("Row", bound=Keyed)


async def newest_first(
    session: AsyncSession,
    query: Select[Row],
    created_at: InstrumentedAttribute[datetime],
    id_: InstrumentedAttribute[str],
    *,
    limit: int,
    after: Cursor | None,
) -> tuple[list[Row], str | None]:
    """Up to `limit` rows of `query` after `after`, newest first, and the cursor of the next
    page (None after the last)."""
    if after is not None:
        query = query.where(
            or_(
                created_at < after.created_at,
                and_(created_at == after.created_at, id_ < after.id),
            )
        )
    query = query.order_by(created_at.desc(), id_.desc()).limit(limit + 1)
    rows: list[Any] = list(await session.scalars(query))
    page: list[Row] = rows[:limit]
    more = len(rows) > limit
    return page, Cursor(page[-1].created_at, page[-1].id).encode() if more else None
