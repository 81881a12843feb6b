"""HTTP for the chat (SPEC 4.2) and the conversations (CONTRACT 2)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from controlcenter.auth.dependencies import CurrentUser, ServicesDep
from controlcenter.chat.agent import ChatTurn, run_chat
from controlcenter.chat.conversations import (
    delete_conversation,
    get_conversation,
    list_conversations,
)
from controlcenter.chat.schemas import (
    API_KEY_SETTINGS,
    INVALID_TEXT,
    missing_key_message,
    parse_chat_request,
)
from controlcenter.chat.stream import EventChannel
from controlcenter.errors import ApiError, InvalidJSONError, InvalidTextError
from controlcenter.http import read_json

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
    request: Request, principal: CurrentUser, services: ServicesDep
) -> StreamingResponse:
    try:
        body = await read_json(request)
    except InvalidJSONError as exc:
        raise ApiError(400, "Invalid JSON body") from exc
    except InvalidTextError as exc:
        raise ApiError(400, INVALID_TEXT) from exc  # SPEC 4.2's errors are plain `{error}`
    parsed = parse_chat_request(body)
    api_key = await services.settings.get(API_KEY_SETTINGS[parsed.provider])
    if not api_key:
        raise ApiError(400, missing_key_message(parsed.provider))
    channel = EventChannel()
    services.chat_runs.start(
        run_chat(
            services,
            ChatTurn(
                user=principal.user,
                message=parsed.message,
                conversation_id=parsed.conversation_id,
                provider=parsed.provider,
                api_key=api_key,
            ),
            channel,
        )
    )
    return StreamingResponse(channel.frames(), headers=SSE_HEADERS)


@router.get("/conversations")
async def conversations(principal: CurrentUser, services: ServicesDep) -> dict[str, Any]:
    return {"conversations": await list_conversations(services.db, principal.user.id)}


@router.get("/conversations/{conversation_id}")
async def conversation(
    conversation_id: str, principal: CurrentUser, services: ServicesDep
) -> dict[str, Any]:
    found = await get_conversation(services.db, principal.user.id, conversation_id)
    if found is None:
        raise ApiError(404, CONVERSATION_NOT_FOUND)
    return {"conversation": found}


@router.delete("/conversations/{conversation_id}")
async def remove_conversation(
    conversation_id: str, principal: CurrentUser, services: ServicesDep
) -> dict[str, Any]:
    if not await delete_conversation(services.db, principal.user.id, conversation_id):
        raise ApiError(404, CONVERSATION_NOT_FOUND)
    return {"success": True}
