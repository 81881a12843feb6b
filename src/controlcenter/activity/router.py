"""HTTP for the ledger of the assistant's writes: the broker's entries and their undo, and
every broker's entries for administrators."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query

from controlcenter.activity.deps import UndoDep
from controlcenter.activity.schemas import EntryAnswer, EntryPage, entry_json
from controlcenter.activity.service import UndoRefusedError, list_entries
from controlcenter.auth.deps import Admin, CurrentUser
from controlcenter.chat.request import INVALID_TEXT
from controlcenter.web.deps import DatabaseDep
from controlcenter.web.errors import ApiError
from controlcenter.web.openapi_doc import answers
from controlcenter.web.pagination import (
    DEFAULT_LIMIT,
    PageCursor,
    PageLimit,
    cursor_key,
    next_cursor,
)
from controlcenter.web.validation import text_problem

router = APIRouter(tags=["activity"])

Search = Annotated[
    str | None,
    Query(
        max_length=200,
        description="only entries whose tool, title or summary contains it (case-insensitive)",
    ),
]
IdQuery = Annotated[str | None, Query(max_length=64, pattern="^[A-Za-z0-9_-]+$")]


def _after(cursor: str | None, q: str | None) -> tuple[datetime, str] | None:
    if q is not None and text_problem(q) is not None:
        raise ApiError(400, INVALID_TEXT)
    return cursor_key(cursor)


@router.get("/api/v1/control-center/activity", **answers(EntryPage, 400, 401))
async def own_activity(
    principal: CurrentUser,
    db: DatabaseDep,
    limit: PageLimit = DEFAULT_LIMIT,
    cursor: PageCursor = None,
    q: Search = None,
    conversationId: Annotated[
        str | None,
        Query(max_length=64, pattern="^[A-Za-z0-9_-]+$", description="only this conversation's"),
    ] = None,
) -> dict[str, Any]:
    """The writes the assistant made for the caller (and their undos), newest first."""
    page, more = await list_entries(
        db,
        principal.user.id,
        limit=limit,
        after=_after(cursor, q),
        containing=q,
        conversation_id=conversationId,
    )
    return {"entries": [entry_json(row) for row in page], "nextCursor": next_cursor(page, more)}


@router.post(
    "/api/v1/control-center/activity/{entry_id}/undo",
    **answers(EntryAnswer, 401, 404, 409, 422, 502, write=True),
)
async def undo_entry(entry_id: str, principal: CurrentUser, undo: UndoDep) -> dict[str, Any]:
    """Reverse one of the caller's writes with its inverse call, after reading that the object
    still holds what the write left. 404 `Entry not found` (also another user's), 409 `Changed
    since` or `Already undone`, 422 `Cannot be undone` (no known inverse: MCP tools, sent
    messages, failed writes, an undo), 502 when the CRM cannot be reached or refuses. The
    answer is the new entry that records the undo."""
    try:
        done = await undo.undo(principal.user, entry_id)
    except UndoRefusedError as exc:
        raise ApiError(exc.status, exc.message) from exc
    return {"entry": entry_json(done)}


@router.get("/api/v1/admin/activity", **answers(EntryPage, 400, 403))
async def all_activity(
    principal: Admin,
    db: DatabaseDep,
    limit: PageLimit = DEFAULT_LIMIT,
    cursor: PageCursor = None,
    q: Search = None,
    userId: IdQuery = None,
) -> dict[str, Any]:
    """Every user's entries with their `userId`, newest first (`userId=`: one user's)."""
    page, more = await list_entries(db, userId, limit=limit, after=_after(cursor, q), containing=q)
    return {
        "entries": [entry_json(row, with_user=True) for row in page],
        "nextCursor": next_cursor(page, more),
    }
