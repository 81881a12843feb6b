"""HTTP for the chat and the conversations."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from controlcenter.auth.deps import CurrentUser
from controlcenter.auth.models import UserRecord
from controlcenter.chat.channel import EventChannel
from controlcenter.chat.conversations import (
    delete_conversation,
    get_conversation,
    list_conversations,
    rename_conversation,
)
from controlcenter.chat.deps import ChatPartsDep
from controlcenter.chat.models import APPROVED, DENIED
from controlcenter.chat.request import (
    INVALID_TEXT,
    ChatInput,
    ChatRequestError,
    parse_chat_request,
    read_chat_body,
)
from controlcenter.chat.resume import (
    EVENT_ID_PATTERN,
    InvalidLastEventIdError,
    after_event,
    owned_run,
    tail,
)
from controlcenter.chat.run.commands import (
    ApprovalAnswer,
    StopAnswer,
    answer_approval,
    request_stop,
)
from controlcenter.chat.schemas import (
    SSE_DESCRIPTION,
    SSE_EXAMPLE,
    ChatEventFrame,
    ChatRequest,
    ConversationAnswer,
    ConversationPage,
    ConversationRename,
    ProviderList,
    ToolList,
    conversation_json,
    conversation_with_messages,
)
from controlcenter.chat.service import (
    ChatParts,
    MissingApiKeyError,
    QuotaReachedError,
    providers_with_key,
    start_chat,
    tools_for,
)
from controlcenter.web.body import read_model
from controlcenter.web.deps import DatabaseDep
from controlcenter.web.errors import ApiError
from controlcenter.web.openapi_doc import Success, answers, json_body
from controlcenter.web.pagination import (
    DEFAULT_LIMIT,
    PageCursor,
    PageLimit,
    cursor_key,
    next_cursor,
)
from controlcenter.web.validation import text_problem

router = APIRouter(prefix="/api/v1/control-center", tags=["chat"])

CONVERSATION_NOT_FOUND = "Conversation not found"
MESSAGE_NOT_FOUND = "Message not found"
NOT_RUNNING = "Not running"
TOOL_CALL_NOT_FOUND = "Tool call not found"
NOT_WAITING = "Not waiting for approval"
INVALID_LAST_EVENT_ID = "Invalid Last-Event-ID: expected <messageId>:<n> of this message"
# Set in full so that Starlette appends no `; charset=utf-8`: the stream's type is exactly
# `text/event-stream`.
SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",  # proxies such as nginx must not hold frames back
}


@router.post(
    "/chat",
    **answers(
        ChatEventFrame, 400, 401, 413, 429, write=True, stream=SSE_DESCRIPTION, example=SSE_EXAMPLE
    ),
    openapi_extra=json_body(ChatRequest),
)
async def chat(
    request: Request,
    principal: CurrentUser,
    chat_parts: ChatPartsDep,
    ids: Annotated[
        str | None, Query(max_length=10, description="`1`: every frame has an `id:` line")
    ] = None,
    deltas: Annotated[
        str | None,
        Query(max_length=10, description="`tokens`: the text as the provider streams it"),
    ] = None,
) -> StreamingResponse:
    body = await read_chat_body(request)
    channel = await started_chat(
        chat_parts,
        principal.user,
        lambda: parse_chat_request(body),
        ids=ids == "1",
        token_deltas=deltas == "tokens",
    )
    return StreamingResponse(channel.frames(), headers=SSE_HEADERS)


async def started_chat(
    chat_parts: ChatParts,
    user: UserRecord,
    parse: Callable[[], ChatInput],
    *,
    ids: bool = False,
    token_deltas: bool = False,
) -> EventChannel:
    """The chat's pre-stream checks as HTTP answers, for both chat
    endpoints; the started run's channel."""
    try:
        return await start_chat(chat_parts, user, parse(), ids=ids, token_deltas=token_deltas)
    except (ChatRequestError, MissingApiKeyError) as exc:
        raise ApiError(400, str(exc)) from exc
    except QuotaReachedError as exc:
        raise ApiError(429, str(exc)) from exc


@router.get(
    "/chat/{message_id}/events",
    **answers(ChatEventFrame, 400, 401, 404, stream=SSE_DESCRIPTION, example=SSE_EXAMPLE),
)
async def chat_events(
    message_id: str,
    principal: CurrentUser,
    chat_parts: ChatPartsDep,
    after: Annotated[int | None, Query(ge=0, le=10**9)] = None,
    last_event_id: Annotated[
        str | None,
        Header(
            max_length=200,
            json_schema_extra={"pattern": EVENT_ID_PATTERN},
            description="the `id:` of the client's last frame, `<messageId>:<n>` of this "
            "message (its `message_id`); it wins over `after`",
        ),
    ] = None,
) -> StreamingResponse:
    """The message's events after the client's last, live until its end."""
    try:
        start = after_event(message_id, last_event_id, after)
    except InvalidLastEventIdError as exc:
        raise ApiError(400, INVALID_LAST_EVENT_ID) from exc
    if not await owned_run(chat_parts.db, message_id, principal.user.id):
        raise ApiError(404, MESSAGE_NOT_FOUND)
    frames = tail(chat_parts.db, chat_parts.runs.signals, message_id, start)
    return StreamingResponse(frames, headers=SSE_HEADERS)


# What the store met, as the refusal it is answered with; any other outcome went through.
_STOP_REFUSED: dict[Enum, tuple[int, str]] = {
    StopAnswer.NOT_FOUND: (404, MESSAGE_NOT_FOUND),
    StopAnswer.NOT_RUNNING: (409, NOT_RUNNING),
}
_ANSWER_REFUSED: dict[Enum, tuple[int, str]] = {
    ApprovalAnswer.NOT_FOUND: (404, TOOL_CALL_NOT_FOUND),
    ApprovalAnswer.CONFLICT: (409, NOT_WAITING),
}


def _refuse(outcome: Enum, refused: Mapping[Enum, tuple[int, str]]) -> None:
    if outcome in refused:
        raise ApiError(*refused[outcome])


@router.post("/chat/{message_id}/stop", **answers(Success, 401, 404, 409, write=True))
async def stop_chat(
    message_id: str, principal: CurrentUser, chat_parts: ChatPartsDep
) -> dict[str, Any]:
    signals = chat_parts.runs.signals
    _refuse(
        await request_stop(chat_parts.db, signals, message_id, principal.user.id), _STOP_REFUSED
    )
    return {"success": True}


def _answer_route(verb: str, status: str) -> None:
    """POST .../tool-calls/{id}/approve and .../deny: one route but for the answer it stores.
    `name` keeps each operation's id and summary those of a function named for it."""

    async def answer_tool_call(
        message_id: str, tool_call_id: str, principal: CurrentUser, chat_parts: ChatPartsDep
    ) -> dict[str, Any]:
        user_id = principal.user.id
        signals = chat_parts.runs.signals
        found = await answer_approval(
            chat_parts.db, signals, message_id, tool_call_id, user_id, status
        )
        _refuse(found, _ANSWER_REFUSED)
        return {"success": True}

    router.post(
        f"/chat/{{message_id}}/tool-calls/{{tool_call_id}}/{verb}",
        name=f"{verb}_tool_call",
        **answers(Success, 401, 404, 409, write=True),
    )(answer_tool_call)


_answer_route("approve", APPROVED)
_answer_route("deny", DENIED)


@router.get("/providers", **answers(ProviderList, 401))
async def providers(principal: CurrentUser, chat_parts: ChatPartsDep) -> dict[str, Any]:
    """The providers a chat may use now: those whose key is set."""
    return {"providers": await providers_with_key(chat_parts.settings)}


@router.get("/tools", **answers(ToolList, 401))
async def tools(principal: CurrentUser, chat_parts: ChatPartsDep) -> dict[str, Any]:
    """The tools the caller's chats can use, with their titles."""
    found = await tools_for(chat_parts, principal.user)
    return {"tools": [{"name": tool.name, "title": tool.title} for tool in found]}


@router.get("/conversations", **answers(ConversationPage, 400, 401))
async def conversations(
    principal: CurrentUser,
    db: DatabaseDep,
    limit: PageLimit = DEFAULT_LIMIT,
    cursor: PageCursor = None,
    q: Annotated[
        str | None,
        Query(
            max_length=200,
            description="only conversations whose title or message text contains it "
            "(case-insensitive)",
        ),
    ] = None,
) -> dict[str, Any]:
    """The caller's conversations, newest first, without their messages."""
    after = cursor_key(cursor)
    if q is not None and text_problem(q) is not None:
        raise ApiError(400, INVALID_TEXT)
    page, more = await list_conversations(
        db,
        principal.user.id,
        limit=limit,
        after=after,
        containing=q,
    )
    return {
        "conversations": [conversation_json(row) for row in page],
        "nextCursor": next_cursor(page, more),
    }


def _conversation_id(value: str) -> str:
    """A path's conversation id, as storage may be asked about it: an id no conversation can
    have (NUL or a lone surrogate, which PostgreSQL refuses in a query) is not found."""
    if text_problem(value) is not None:
        raise ApiError(404, CONVERSATION_NOT_FOUND)
    return value


@router.get("/conversations/{conversation_id}", **answers(ConversationAnswer, 401, 404))
async def conversation(
    conversation_id: str, principal: CurrentUser, db: DatabaseDep
) -> dict[str, Any]:
    found = await get_conversation(db, principal.user.id, _conversation_id(conversation_id))
    if found is None:
        raise ApiError(404, CONVERSATION_NOT_FOUND)
    return {"conversation": conversation_with_messages(*found)}


@router.patch(
    "/conversations/{conversation_id}",
    **answers(ConversationAnswer, 400, 401, 404, 413, write=True),
    openapi_extra=json_body(ConversationRename),
)
async def rename(
    conversation_id: str, request: Request, principal: CurrentUser, db: DatabaseDep
) -> dict[str, Any]:
    """Give the conversation a title of the caller's choosing."""
    body = await read_model(request, ConversationRename)
    owned = _conversation_id(conversation_id)
    found = await rename_conversation(db, principal.user.id, owned, body.title)
    if found is None:
        raise ApiError(404, CONVERSATION_NOT_FOUND)
    return {"conversation": conversation_json(found)}


@router.delete("/conversations/{conversation_id}", **answers(Success, 401, 404, write=True))
async def remove_conversation(
    conversation_id: str, principal: CurrentUser, db: DatabaseDep
) -> dict[str, Any]:
    if not await delete_conversation(db, principal.user.id, _conversation_id(conversation_id)):
        raise ApiError(404, CONVERSATION_NOT_FOUND)
    return {"success": True}
