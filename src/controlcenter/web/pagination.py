"""Keyset cursors for lists ordered newest first by (created_at, id).

A cursor names the last item of a page, so it stays valid while items are added or removed:
the next page starts right after that item, wherever it now is. It is opaque to clients
(base64url of JSON), and a cursor that does not decode is the client's error.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Protocol

from fastapi import Query

from controlcenter.web.errors import ApiError

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

    @property
    def key(self) -> tuple[datetime, str]:
        """The item it names, as storage takes it: its creation time and id."""
        return self.created_at, self.id


class Keyed(Protocol):
    @property
    def created_at(self) -> datetime: ...
    @property
    def id(self) -> str: ...


def next_cursor(page: Sequence[Keyed], more: bool) -> str | None:
    """The cursor of the page after `page` (its last item), None when no more follow."""
    return Cursor(page[-1].created_at, page[-1].id).encode() if more and page else None


PageLimit = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
PageCursor = Annotated[
    str | None,
    Query(
        max_length=500,
        json_schema_extra={"pattern": CURSOR_PATTERN},
        description="`nextCursor` of the previous page, as it came",
    ),
]


def cursor_key(cursor: str | None) -> tuple[datetime, str] | None:
    """The item a request's cursor names, as storage takes it (None for the first page).
    Raises ApiError 400 `Invalid cursor` when it does not decode."""
    try:
        return Cursor.decode(cursor).key if cursor else None
    except InvalidCursorError as exc:
        raise ApiError(400, INVALID_CURSOR) from exc
