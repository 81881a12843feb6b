"""What the chat tests share: settings, a real SSE client, the providers under test."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import aconnect_sse
from sqlalchemy import func, select

from controlcenter.chat.models import ConversationRow, Message
from tests.conftest import AppUser, RunningServer
from tests.dbtools import reading
from tests.fakes.llm import FakeAnthropic, FakeOpenAI

CHAT = "/api/v1/control-center/chat"
CONVERSATIONS = "/api/v1/control-center/conversations"
MESSAGE_ID = re.compile(r"^msg_\d{13}_[0-9a-z]{9}$")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@dataclass
class Llm:
    """One provider under test: its wire name, its fake, and the setting holding its key."""

    name: str
    fake: FakeAnthropic | FakeOpenAI
    setting: str

    def offered_tools(self, request: dict[str, Any]) -> list[str]:
        tools = request.get("tools") or []
        if self.name == "provider_a":
            return [t["name"] for t in tools]
        return [t["function"]["name"] for t in tools]

    def turns(self, request: dict[str, Any]) -> list[tuple[str, str]]:
        """The request's conversation as (role, text) pairs, whatever the API's form.

        Tool calls read as `call <name> <json args>`, tool results as their text; the system
        prompt is left out.
        """
        pairs: list[tuple[str, str]] = []
        for message in request["messages"]:
            role = message["role"]
            if role == "system":
                continue
            content = message.get("content")
            if isinstance(content, str):
                pairs.append((role, content))
            elif isinstance(content, list):
                for block in content:
                    pairs.append((role, _block_text(block)))
            for call in message.get("tool_calls") or []:
                function = call["function"]
                args = json.loads(function["arguments"])
                pairs.append((role, f"call {function['name']} {json.dumps(args, sort_keys=True)}"))
        return pairs

    def system(self, request: dict[str, Any]) -> str:
        if self.name == "provider_a":
            system = request["system"]
            return system if isinstance(system, str) else " ".join(b["text"] for b in system)
        first = request["messages"][0]
        assert first["role"] in ("system", "developer")
        return str(first["content"])


def _block_text(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block["text"])
    if kind == "tool_use":
        return f"call {block['name']} {json.dumps(block['input'], sort_keys=True)}"
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return "\n".join(b["text"] for b in content if b.get("type") == "text")
        return str(content)
    raise AssertionError(f"unexpected block {block}")


async def set_settings(server: RunningServer, values: dict[str, str], user: AppUser) -> None:
    await server.db.run_write(server.settings.save, values, user.id)


async def stream_chat(
    client: httpx.AsyncClient, user: AppUser, body: dict[str, Any]
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """POST the chat and read every event with a real SSE client."""
    async with aconnect_sse(client, "POST", CHAT, json=body, headers=user.headers) as source:
        events = [json.loads(sse.data) async for sse in source.aiter_sse()]
        return source.response, events


async def conversation_title(client: httpx.AsyncClient, user: AppUser, conversation_id: str) -> str:
    """The conversation's title as `GET /conversations/{id}` answers it to `user`."""
    got = await client.get(f"{CONVERSATIONS}/{conversation_id}", headers=user.headers)
    assert got.status_code == 200, got.text
    return str(got.json()["conversation"]["title"])


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


async def count_rows(server: RunningServer) -> tuple[int, int]:
    async with reading(server.db) as db:
        conversations = await db.scalar(select(func.count()).select_from(ConversationRow))
        messages = await db.scalar(select(func.count()).select_from(Message))
    return int(conversations or 0), int(messages or 0)


async def stored_messages(server: RunningServer, conversation_id: str) -> list[Message]:
    async with reading(server.db) as db:
        rows = await db.scalars(
            select(Message).where(Message.conversation_id == conversation_id).order_by(Message.seq)
        )
        return list(rows)


async def wait_for(predicate: Any, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)
