"""What storing a chat's events costs (the target: storing the chat's run and events adds under
5% to the chat's CPU), measured alone so that the noise of a whole chat does not hide it.

In the bench process itself, against the run's database: N chats at once, each the chat
section's chat (message_start, three provider replies 200 ms apart with two tool calls and
their results between them, the assistant message and message_complete), every event sent to
the chat's stream (`EventChannel`, nobody reading it). Two paths, each its process CPU time per
chat:
- the baseline: the user's message (with its new conversation) and the assistant's stored
  alone, each in one plain write (`Database.run_write`, the rows the store writes for them), the
  chat's pauses for its provider between them: what a chat would write if its run and its
  events were not stored;
- the service's path, as `stream.ChatRuns.begin` and `turn.run_chat` take it: the turn's
  start in one write (`start_turn`: the conversation, the user's message, the run and
  message_start), the process's LISTEN connection (`Signals.listen`, PostgreSQL only), each
  event through the run's `RunRecord` to the process's `EventWriter` (`RunRecord.waiting`
  before each pause for the provider, usage counted), and the run's end in one awaited write
  with its last events, message_complete and the assistant message (`RunRecord.finish`).
  The stop flags' poll on SQLite (`ChatRuns`) is the stop's cost, not storage's: it is left
  out.
Storage costs the difference between the two. A lone chat's run takes two transactions more than
its messages alone (the events of its first two replies, each written as the run waits for its
provider); with many chats at once the writer's transactions hold many runs' events and ends, where
each of the baseline's messages takes its own, so the difference can fall below zero. Each level
runs in rounds (`ROUNDS`): in a round the two paths' chats run in turn, in one process, each first
in every other round (a shared machine's state drifts: taking turns keeps it alike for both, where
measured one after the other in separate processes the drift can outweigh the difference). Storage
is the mean of the rounds' differences, with its standard error; the rounds stop once that error is
small enough (`CLEAR`, `PRECISE`). The row gives it as a share of the chat section's CPU per chat
at the same level and database, measured earlier in the same run.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, update
from sqlalchemy.orm import Session

from bench.chat import CPU_PER_CHAT
from bench.deploy import Deployment, Options
from bench.results import Row, ms, pct
from bench.seed import seed_accounts
from bench.timeline import step
from controlcenter.chat.channel import EventChannel
from controlcenter.chat.events import (
    Event,
    content_delta,
    message_complete,
    message_start,
    tool_call_start,
    tool_result,
)
from controlcenter.chat.fold import fold
from controlcenter.chat.models import DONE, USER, ConversationRow, Message
from controlcenter.chat.run.answer import assistant_message
from controlcenter.chat.run.record import RunRecord
from controlcenter.chat.run.start import TITLE_LENGTH, new_message_id, start_turn
from controlcenter.chat.run.writer import EventWriter, RunUsage
from controlcenter.chat.schemas import message_json
from controlcenter.chat.signals import Signals
from controlcenter.db import Database, new_id, utcnow
from controlcenter.llm.types import ToolInvocation, ToolOutcome

REPLY_GAP_S = 0.2  # the chat section's provider delay
QUESTION = "Bench: what is new?"
ANSWER = "Here is what I found."
INPUT_TOKENS, OUTPUT_TOKENS = 10, 5  # each provider reply's usage
# The service's CPU per chat: the whole that storage is a share of. The chat section's figure
# for the same database and level when it ran before in this run, else this order of
# magnitude (a chat at x100), named as such in the row.
CHAT_CPU_S = 0.030
TARGET_SHARE = 0.05
# Rounds by level, at most; x1 is a few ms a chat, so more of them. They stop sooner, after an
# even number of at least FEWEST (each path first as often as the other), once the standard
# error says enough: the mean further from the target than CLEAR standard errors (the verdict
# stands), or the error under PRECISE of the target (the figure is known to within a tenth).
ROUNDS = {1: 14, 100: 6, 300: 4}
FEWEST = 4
CLEAR = 2.0
PRECISE = 0.1

_CALL = ToolInvocation(id="toolu_1", name="echo_text", arguments={"text": "round"})
_RESULT = ToolOutcome(tool_call_id="toolu_1", success=True, result={"text": "round"})
_TOOL_REPLY: list[Event] = [
    content_delta("Looking that up."),
    tool_call_start(_CALL),
    tool_result(_RESULT),
]
# The chat's events after message_start, as the provider's three replies bring them.
REPLIES: list[list[Event]] = [_TOOL_REPLY, _TOOL_REPLY, [content_delta(ANSWER)]]
TOOL_CALLS = sum(event["type"] == "tool_call_start" for reply in REPLIES for event in reply)
# What the run's usage comes to (the baseline's answer carries the same).
USAGE = RunUsage(
    INPUT_TOKENS * len(REPLIES), OUTPUT_TOKENS * len(REPLIES), len(REPLIES), TOOL_CALLS
)


@dataclass(frozen=True)
class Parts:
    """What a process of the service holds for its chats: the database, the wake-ups and the
    event writer."""

    db: Database
    signals: Signals
    writer: EventWriter


Chat = Callable[[Parts, str, str], Awaitable[None]]


def _answer(conversation_id: str, message_id: str, usage: RunUsage) -> Message:
    answer = fold(
        [
            {"type": "content_delta", "delta": "Looking that up." * 2 + ANSWER},
            *[{"type": "tool_call_start", "toolCall": _CALL.to_json()}] * TOOL_CALLS,
            *[{"type": "tool_result", "toolResult": _RESULT.to_json()}] * TOOL_CALLS,
        ]
    )
    return assistant_message(conversation_id, message_id, answer, usage=usage.json())


async def _messages_alone(parts: Parts, user_id: str, message_id: str) -> None:
    """The two messages, each in a plain write, without the run or its events."""
    channel = EventChannel()
    conversation_id = new_id()
    now = utcnow()
    await parts.db.run_write(_add_question, user_id, conversation_id, now)
    channel.send(message_start(conversation_id, message_id))
    # The chat's pauses for its provider, as in the other path: waking after a pause costs a
    # lone chat ~0.7 ms of CPU each (cold caches), which is not its storage's.
    for reply in REPLIES:
        await asyncio.sleep(REPLY_GAP_S)
        for event in reply:
            channel.send(event)
    message = _answer(conversation_id, message_id, USAGE)
    await parts.db.run_write(_add_answer, message)
    channel.send(message_complete(message_json(message)))
    channel.close()


def _add_question(session: Session, user_id: str, conversation_id: str, now: datetime) -> None:
    """The conversation and the user's message, in a plain write."""
    session.execute(
        insert(ConversationRow).values(
            id=conversation_id, user_id=user_id, title=QUESTION[: TITLE_LENGTH],
            created_at=now, updated_at=now,
        )
    )  # fmt: skip
    session.execute(
        insert(Message).values(
            id=new_message_id(), conversation_id=conversation_id, role=USER,
            content=QUESTION, created_at=now, interrupted=False,
        )
    )  # fmt: skip


def _add_answer(session: Session, message: Message) -> None:
    """The answer, its conversation touched, in a plain write."""
    session.execute(insert(Message).values(_row(message)))
    session.execute(
        update(ConversationRow)
        .where(ConversationRow.id == message.conversation_id)
        .values(updated_at=message.created_at)
    )


def _row(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "conversation_id": message.conversation_id,
        "role": message.role,
        "content": message.content,
        "tool_calls": message.tool_calls,
        "tool_results": message.tool_results,
        "usage": message.usage,
        "created_at": message.created_at,
        "interrupted": False,
    }


async def _with_store(parts: Parts, user_id: str, message_id: str) -> None:
    """The service's path: the turn's start, the run's events and its end, by the store."""
    channel = EventChannel()
    started = await start_turn(
        parts.db, user_id=user_id, conversation_id=None, message=QUESTION, answer_id=message_id
    )
    assert started is not None
    await parts.signals.listen()
    flags = parts.signals.enlist(message_id)
    run = RunRecord(parts.db, parts.signals, parts.writer, message_id, started, channel, flags)
    run.begin()
    for reply in REPLIES:
        run.waiting()  # as the agent does before each provider call
        await asyncio.sleep(REPLY_GAP_S)
        run.count_provider_call(INPUT_TOKENS, OUTPUT_TOKENS)
        for event in reply:
            if event["type"] == "tool_call_start":
                run.count_tool_call()
            run.send(event)
    # As the agent ends an answer: the message, the last events, message_complete and the
    # run's end in one write, then the channel closed and the (already stored) end again.
    message = _answer(run.conversation_id, message_id, run.usage)
    await run.finish(DONE, message_complete(message_json(message)), message)
    channel.close()
    await run.finish(DONE)


async def _rounds(url: str, user_id: str, chats: int, limit: float) -> dict[str, list[float]]:
    """Each path's CPU per chat with `chats` at once, round by round, the paths in turn, until
    the storage's verdict against `limit` (CPU per chat) is clear or `ROUNDS` are done."""
    paths: dict[str, Chat] = {"u": _messages_alone, "a": _with_store}
    spent: dict[str, list[float]] = {tag: [] for tag in paths}
    async with _parts(url) as parts:
        # Pools and statements. x1's chats, one at a time, reuse the connections the warm-up
        # opened: its paths warm them in turn, as they run in the rounds. The other levels'
        # chats open many, most of them cold either way: their paths warm up at once (in
        # turn, the pauses for the provider cost 1.2 s more per level).
        warm = [chat(parts, user_id, f"msg_0_warm{tag}{chats}") for tag, chat in paths.items()]
        if chats == 1:
            for one in warm:
                await one
        else:
            await asyncio.gather(*warm)
        for r in range(ROUNDS[chats]):
            order = ["u", "a"] if r % 2 == 0 else ["a", "u"]
            for tag in order:
                cpu = time.process_time()
                chat = paths[tag]
                await asyncio.gather(
                    *(chat(parts, user_id, f"msg_1_{tag}{chats}r{r}x{i:05d}") for i in range(chats))
                )
                spent[tag].append((time.process_time() - cpu) / chats)
            if r + 1 >= FEWEST and (r + 1) % 2 == 0:
                mean, error = _storage(spent["a"], spent["u"])
                if abs(limit - mean) > CLEAR * error or error < PRECISE * limit:
                    break
    return spent


@asynccontextmanager
async def _parts(url: str) -> AsyncIterator[Parts]:
    db = Database(url)
    signals = Signals(db)
    writer = EventWriter(db, signals)
    try:
        yield Parts(db, signals, writer)
    finally:
        await writer.close(5.0)
        await signals.aclose()
        await db.dispose()


def _storage(path: list[float], alone: list[float]) -> tuple[float, float]:
    """The mean of the rounds' differences and its standard error."""
    differences = [a - b for a, b in zip(path, alone, strict=True)]
    error = statistics.stdev(differences) / math.sqrt(len(differences))
    return statistics.mean(differences), error


def run(deployment: Deployment, options: Options) -> list[Row]:
    url = deployment.database_url
    (user,) = asyncio.run(seed_accounts(url, deployment.secret_key, "store", 1))
    rows = []
    for chats in (1, 100, 300):
        measured = CPU_PER_CHAT.get((deployment.db_kind, chats))
        whole = measured or CHAT_CPU_S
        with step(f"storage x{chats}"):
            spent = asyncio.run(_rounds(url, user.id, chats, TARGET_SHARE * whole))
        alone = statistics.mean(spent["u"])
        after, error = _storage(spent["a"], spent["u"])
        spread = f" ± {ms(error)}, mean of {len(spent['a'])} rounds"
        of = f"this run's chat x{chats}, {ms(whole)}" if measured else f"a chat's ~{ms(whole)}"
        rows.append(
            Row(
                deployment.db_kind,
                f"chat storage x{chats}: CPU per chat",
                f"{ms(after)}{spread} (event writer)",
                baseline=f"the two messages {ms(alone)}",
                ratio=f"{pct(after / whole)} of {of}",
                target=f"< {pct(TARGET_SHARE)} of the chat",
                met=after < TARGET_SHARE * whole,
            )
        )
    return rows
