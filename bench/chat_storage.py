"""What storing the chat's events costs (issue 16: event ids and storage add under 5% to the
chat figures), measured alone so that the noise of a whole chat does not hide it.

In the bench process itself, against the run's database: N chats at once, each saving the
user's message and starting its run (`conversations.start_turn`), then sending the events of
the chat section's chat (message_start, three provider replies 200 ms apart, with two tool
calls and their results between them, message_complete) through the service's own recorder,
and ending the run. Three paths, each its process CPU time per chat:
- the user's message alone (what a chat wrote before its events were stored);
- run by run, as before the process-wide writer: the run's own transaction, then each burst
  and the end in one transaction each (`run_store.append_events`);
- the service's path: the run in the user message's transaction, the events and the end by
  the process's `EventWriter`.
Storage costs the difference between the last and the first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from bench.chat import CPU_PER_CHAT
from bench.deploy import Deployment, Options
from bench.results import Row, ms, pct
from bench.seed import seed_accounts
from controlcenter.chat import run_store
from controlcenter.chat.conversations import start_turn
from controlcenter.chat.events import (
    content_delta,
    event_data,
    message_complete,
    message_start,
    tool_call_start,
    tool_result,
)
from controlcenter.chat.recorder import EventWriter, RunRecord
from controlcenter.chat.signals import Signals
from controlcenter.db import Database
from controlcenter.llm.types import ToolCall, ToolResult

REPLY_GAP_S = 0.2  # the chat section's provider delay
# The service's CPU per chat: the whole that storage is a share of. The chat section's figure
# for the same database and level when it ran before in this run, else this order (x100 on
# 2026-11-23, after the chat controls), named as such in the row.
CHAT_CPU_S = 0.030
TARGET_SHARE = 0.05


def _bursts(message_id: str) -> list[list[str]]:
    """The chat's events after message_start, as the provider's replies send them."""
    call = ToolCall(id="toolu_1", name="echo_text", arguments={"text": "round"})
    result = ToolResult(tool_call_id="toolu_1", success=True, result={"text": "round"})
    tool = [
        event_data(content_delta("Looking that up.")),
        event_data(tool_call_start(call)),
        event_data(tool_result(result)),
    ]
    message = {"id": message_id, "role": "assistant", "content": "Here is what I found."}
    last = [
        event_data(content_delta("Here is what I found.")),
        event_data(message_complete(message)),
    ]
    return [tool, tool, last]


Chat = Callable[[Database, Signals, EventWriter, str, str], Awaitable[None]]


async def _user_message(
    db: Database, signals: Signals, writer: EventWriter, user_id: str, message_id: str
) -> None:
    await start_turn(db, user_id=user_id, conversation_id=None, message="Bench: what is new?")


async def _with_writer(
    db: Database, signals: Signals, writer: EventWriter, user_id: str, message_id: str
) -> None:
    started = await start_turn(
        db, user_id=user_id, conversation_id=None, message="Bench: what is new?",
        answer_id=message_id,
    )  # fmt: skip
    assert started is not None
    run = RunRecord(db, signals, writer, message_id)
    run.began()
    for burst in _bursts(message_id):
        await asyncio.sleep(REPLY_GAP_S)
        for data in burst:
            run.record(data)
    await run.finish(run_store.DONE)


async def _run_by_run(
    db: Database, signals: Signals, writer: EventWriter, user_id: str, message_id: str
) -> None:
    await _user_message(db, signals, writer, user_id, message_id)
    first = (1, event_data(message_start("c", message_id)))
    await run_store.create_run(db, message_id, user_id, first)
    n = 1
    bursts = _bursts(message_id)
    for i, burst in enumerate(bursts):
        await asyncio.sleep(REPLY_GAP_S)
        stored = [(n + k + 1, data) for k, data in enumerate(burst)]
        n += len(burst)
        last = i == len(bursts) - 1
        await run_store.append_events(
            db, message_id, stored, status=run_store.DONE if last else None
        )


async def _level(url: str, user_id: str, chats: int, chat: Chat, tag: str) -> float:
    db = Database(url)
    signals = Signals(db, on_stop=lambda _: None)
    writer = EventWriter(db, signals)
    try:
        await chat(db, signals, writer, user_id, f"msg_0_warm{tag}{chats}")  # pools, statements
        cpu = time.process_time()
        await asyncio.gather(
            *(
                chat(db, signals, writer, user_id, f"msg_1_{tag}{chats}x{i:05d}")
                for i in range(chats)
            )
        )
        return (time.process_time() - cpu) / chats
    finally:
        await writer.close(5.0)
        await signals.aclose()
        await db.dispose()


def run(deployment: Deployment, options: Options) -> list[Row]:
    url = deployment.database_url
    (user,) = asyncio.run(seed_accounts(url, deployment.secret_key, "store", 1))
    rows = []
    for chats in (1, 100, 300):
        alone = asyncio.run(_level(url, user.id, chats, _user_message, "u"))
        before = asyncio.run(_level(url, user.id, chats, _run_by_run, "b")) - alone
        after = asyncio.run(_level(url, user.id, chats, _with_writer, "a")) - alone
        measured = CPU_PER_CHAT.get((deployment.db_kind, chats))
        whole = measured or CHAT_CPU_S
        of = f"this run's chat x{chats}, {ms(whole)}" if measured else f"a chat's ~{ms(whole)}"
        rows.append(
            Row(
                deployment.db_kind,
                f"chat storage x{chats}: CPU per chat",
                f"{ms(after)} (event writer)",
                baseline=f"{ms(before)} (run by run); user message {ms(alone)}",
                ratio=f"{pct(after / whole)} of {of}",
                target=f"< {pct(TARGET_SHARE)} of the chat",
                met=after < TARGET_SHARE * whole,
            )
        )
    return rows
