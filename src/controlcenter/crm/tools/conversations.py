"""Conversations (HighLevel app `conversations`, Version 2021-04-15): threads and messages."""

from __future__ import annotations

from typing import Any

from controlcenter.crm.client import CrmClient
from controlcenter.crm.tools.common import (
    Paging,
    crm_tool,
    id_arg,
    path,
    pick,
    require_one,
    schema,
    text,
)

# SendMessageBodyDto requires `status` (delivered, failed, pending, read): a message being
# sent now is pending until the channel reports on it.
NEW_MESSAGE_STATUS = "pending"
PAGING = Paging(20)


@crm_tool(
    "conversations_search-conversation",
    "search-conversation",
    what="conversation",
    description=(
        "Find conversations (SMS, e-mail, chat threads) by contact or text. Use it to see who "
        "wrote recently or to get a conversationId. Returns `conversations` (id, contactId, "
        "fullName, lastMessageBody, lastMessageType, unreadCount) and `total`."
    ),
    schema=schema(
        {
            "contactId": id_arg("contact"),
            "query": text("Text to look for (name, e-mail, phone, last message).", 200),
            **PAGING.schema,
        }
    ),
)
async def search_conversations(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {"locationId": crm.location_id, **pick(args, "contactId", "query")}
    params.update(PAGING.params(args))
    return await crm.get("/conversations/search", params)


@crm_tool(
    "conversations_get-messages",
    "get-messages",
    what="conversation",
    description=(
        "Read the latest messages of one conversation. Returns `messages` (body, direction, "
        "messageType, status, dateAdded), `nextPage` (true when older messages remain) and "
        "`lastMessageId`."
    ),
    schema=schema({"conversationId": id_arg("conversation"), **PAGING.schema}, ["conversationId"]),
)
async def get_messages(crm: CrmClient, args: dict[str, Any]) -> Any:
    where = path("/conversations/{conversationId}/messages", args)
    return page_of_messages(await crm.get(where, PAGING.params(args)))


def page_of_messages(answer: Any) -> Any:
    """GetMessagesByConversationResponseDto is `{lastMessageId, nextPage, messages: [...]}`;
    an answer that nests that page once more under `messages` is unwrapped to the same shape,
    so the model always reads what the description promises."""
    if isinstance(answer, dict) and isinstance(answer.get("messages"), dict):
        return answer["messages"]
    return answer


@crm_tool(
    "conversations_send-a-new-message",
    "send-a-new-message",
    what="contact",
    description=(
        "Send a message to a contact now: SMS (needs the contact's phone) or Email (needs "
        "their e-mail, a subject and the text). Give the text in `message` (or, for Email, "
        "`html`). It really goes out, so only send what the user asked for. Returns "
        "`conversationId`, `messageId` and `status`."
    ),
    schema=schema(
        {
            "type": {
                "type": "string",
                "enum": ["SMS", "Email", "WhatsApp"],
                "description": "Channel.",
            },
            "contactId": id_arg("contact"),
            "message": text("The text of the message.", 5000),
            "subject": text("E-mail subject (Email only).", 300),
            "html": text("E-mail body as HTML (Email only, instead of message).", 50000),
        },
        ["type", "contactId"],
    ),
)
async def send_message(crm: CrmClient, args: dict[str, Any]) -> Any:
    require_one(args, "message", "html", why="Give the text to send in `message` (or `html`).")
    body = {
        **pick(args, "type", "contactId", "message", "subject", "html"),
        # Required by SendMessageBodyDto; its documented example is the channel itself.
        "subType": args["type"],
        "status": NEW_MESSAGE_STATUS,
    }
    return await crm.post("/conversations/messages", body)


TOOLS = (search_conversations, get_messages, send_message)
