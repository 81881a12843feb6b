"""The ledger's answers, as the API writes them and /openapi.json describes them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, Field

from controlcenter.activity.models import ActivityEntry
from controlcenter.activity.service import state, undoable
from controlcenter.common.times import iso
from controlcenter.web.openapi_doc import absent, schema_extra

State = Literal["done", "undone", "failed", "unknown"]


class Entry(BaseModel):
    model_config = schema_extra(
        {
            "id": "6f1c2d9e-6a55-4f7e-9d0b-3c2a1e4b5f60",
            "createdAt": "2026-11-28T15:04:05.123Z",
            "tool": "contacts_update-contact",
            "title": "Update a contact",
            "summary": "Phone of Ada Lovelace: 555-0100 → 555-0199",
            "conversationId": "9b7f4c1e-2d3a-4b5c-8d9e-0f1a2b3c4d5e",
            "messageId": "msg_1764342245123_k3j9x0a1b",
            "toolCallId": "toolu_01",
            "state": "done",
            "undoable": True,
        }
    )
    id: str
    createdAt: AwareDatetime
    tool: str = Field(description="the tool's name, as in `toolCall.name`")
    title: str = Field(description="the tool's human title; an undo's starts with `Undo: `")
    summary: str = Field(
        description="what changed, in words; an update names the field, the value before and "
        "the value after"
    )
    conversationId: str
    messageId: str | None = Field(description="the assistant message whose tool call it was")
    toolCallId: str | None = Field(description="the call's id; null for an undo's entry")
    state: State = Field(
        description="`unknown`: the process making the call stopped before it ended"
    )
    undoable: bool = Field(description="whether `POST .../activity/{id}/undo` may undo it")
    userId: str = absent("in GET /api/v1/admin/activity")


class EntryPage(BaseModel):
    entries: list[Entry]
    nextCursor: str | None


class EntryAnswer(BaseModel):
    entry: Entry


def entry_json(row: ActivityEntry, *, with_user: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "createdAt": iso(row.created_at),
        "tool": row.tool,
        "title": row.title,
        "summary": row.summary,
        "conversationId": row.conversation_id,
        "messageId": row.message_id,
        "toolCallId": row.tool_call_id,
        "state": state(row),
        "undoable": undoable(row),
    }
    if with_user:
        body["userId"] = row.user_id
    return body
