"""HTTP for the chat (SPEC 4.2) and the conversations (CONTRACT 2)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from controlcenter.chat.conversations import (
    delete_conversation,
    get_conversation,
    list_conversations,
)
from controlcenter.chat.request_body import read_chat_body
from controlcenter.chat.schemas import (
    ChatRequestError,
    conversation_json,
    conversation_with_messages,
    parse_chat_request,
)
from controlcenter.chat.service import MissingApiKeyError, start_chat
from controlcenter.web.deps import ChatPartsDep, CurrentUser, DatabaseDep
from controlcenter.web.errors import ApiError
from controlcenter.web.pagination import (
    DEFAULT_LIMIT,
    INVALID_CURSOR,
    MAX_LIMIT,
    Cursor,
    InvalidCursorError,
)

router = APIRouter(prefix="/api/v1/control-center", tags=["chat"])

CONVERSATION_NOT_FOUND = "Conversation not found"
# Set in full so that Starlette appends no `; charset=utf-8` (SPEC 4.2 names the exact type).
SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",  # proxies such as nginx must not hold frames back
}


@router.post("/chat")
async def chat(
    request: Request, principal: CurrentUser, chat_parts: ChatPartsDep
) -> StreamingResponse:
    body = await read_chat_body(request)
    try:
        channel = await start_chat(chat_parts, principal.user, parse_chat_request(body))
    except (ChatRequestError, MissingApiKeyError) as exc:
        raise ApiError(400, str(exc)) from exc
    return StreamingResponse(channel.frames(), headers=SSE_HEADERS)


@router.get("/conversations")
async def conversations(
    principal: CurrentUser,
    db: DatabaseDep,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> dict[str, Any]:
    try:
        after = Cursor.decode(cursor) if cursor else None
    except InvalidCursorError as exc:
        raise ApiError(400, INVALID_CURSOR) from exc
    page, next_cursor = await list_conversations(db, principal.user.id, limit=limit, after=after)
    return {"conversations": [conversation_json(row) for row in page], "nextCursor": next_cursor}


@router.get("/conversations/{conversation_id}")
async def conversation(
    conversation_id: str, principal: CurrentUser, db: DatabaseDep
) -> dict[str, Any]:
    found = await get_conversation(db, principal.user.id, conversation_id)
    if found is None:
        raise ApiError(404, CONVERSATION_NOT_FOUND)
    return {"conversation": conversation_with_messages(*found)}


@router.delete("/conversations/{conversation_id}")
async def remove_conversation(
    conversation_id: str, principal: CurrentUser, db: DatabaseDep
) -> dict[str, Any]:
    if not await delete_conversation(db, principal.user.id, conversation_id):
        raise ApiError(404, CONVERSATION_NOT_FOUND)
    return {"success": True}
