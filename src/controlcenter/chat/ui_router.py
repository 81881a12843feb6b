"""HTTP for the chat of Vercel AI SDK front ends: the chat's checks and turn,
answered as the AI SDK's UI message stream."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from controlcenter.auth.deps import CurrentUser
from controlcenter.chat.deps import ChatPartsDep
from controlcenter.chat.request import read_chat_body
from controlcenter.chat.router import SSE_HEADERS, started_chat
from controlcenter.chat.schemas import UI_STREAM_DESCRIPTION, UiChatRequest, UiMessageFrame
from controlcenter.chat.ui_stream import parse_ui_chat_request, ui_frames
from controlcenter.web.openapi_doc import answers, json_body

router = APIRouter(prefix="/api/v1/control-center", tags=["chat"])

UI_STREAM_HEADERS = {**SSE_HEADERS, "x-vercel-ai-ui-message-stream": "v1"}


@router.post(
    "/ui-chat",
    **answers(UiMessageFrame, 400, 401, 413, 429, write=True, stream=UI_STREAM_DESCRIPTION),
    openapi_extra=json_body(UiChatRequest),
)
async def ui_chat(
    request: Request, principal: CurrentUser, chat_parts: ChatPartsDep
) -> StreamingResponse:
    body = await read_chat_body(request)
    channel = await started_chat(chat_parts, principal.user, lambda: parse_ui_chat_request(body))
    return StreamingResponse(ui_frames(channel.frames()), headers=UI_STREAM_HEADERS)
