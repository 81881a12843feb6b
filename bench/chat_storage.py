"""What storing the chat's events costs (the target: event ids and storage add under 5% to the
chat's CPU), measured alone so that the noise of a whole chat does not hide it.

In the bench process itself, against the run's database: N chats at once, each saving the
user's message and starting its run (`conversations.TurnStarts`), then sending the events of
the chat section's chat (message_start, three provider replies 200 ms apart, with two tool
calls and their results between them), saving the assistant message, sending message_complete
and ending the run, as the service does. Two paths, each its process CPU time per chat:
- the user's message and the assistant's alone, with the chat's pauses for its provider
  between them (what a chat would write if its events were not stored), the chats that start
  or end together in shared transactions as in the service (`db.group_commit`), so that the
  difference is the storage's, not the group commit's;
- the service's path: the run in the user message's transaction, the events by the
  process's `EventWriter`, the last events and the run's end in the assistant message's
  write (`RunRecord.finish_with`).
Storage costs the difference between the last and the first. Each level runs in rounds
(`ROUNDS`): in a round the first and the last path's chats run in turn, in one process, each
first in every other round (a shared machine's state drifts: taking turns keeps it alike for
both; measured one after another in separate processes, x300's difference came out negative).
Storage is the mean of the rounds' differences, with its standard error; the rounds stop once
that error is small enough (`CLEAR`, `PRECISE`). The row gives it as a share of the chat
section's CPU per chat at the same level and database, measured earlier in the same run.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

from controlcenter.chat.recorder import EventWriter, RunRecord
from controlcenter.chat.run_store import RunUsage

from bench.chat import CPU_PER_CHAT
from bench.deploy import Deployment, Options
from bench.results import Row, ms, pct
from bench.seed import seed_accounts
from bench.timeline import step
from controlcenter.chat import run_store
from controlcenter.chat.conversations import (
    TurnStart,
    TurnStarts,
    assistant_message,
)
from controlcenter.chat.events import (
    content_delta,
    event_data,
    message_complete,
    message_start,
    tool_call_start,
    tool_result,
)
from controlcenter.chat.models import Message
from controlcenter.chat.schemas import message_json
from controlcenter.chat.signals import Signals
from controlcenter.db import Database
from controlcenter.db.group_commit import GroupCommit
from controlcenter.llm.types import ToolInvocation, ToolOutcome

REPLY_GAP_S = 0.2  # the chat section's provider delay
QUESTION = "Bench: what is new?"
ANSWER = "Here is what I found."
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


def _bursts(message_id: str) -> list[list[str]]:
    """The chat's events after message_start, as the provider's replies send them."""
    call = ToolInvocation(id="toolu_1", name="echo_text", arguments={"text": "round"})
    result = ToolOutcome(tool_call_id="toolu_1", success=True, result={"text": "round"})
    tool = [
        event_data(content_delta("Looking that up.")),
        event_data(tool_call_start(call)),
        event_data(tool_result(result)),
    ]
    return [tool, tool, [event_data(content_delta(ANSWER))]]


@dataclass(frozen=True)
class Parts:
    """What a process of the service holds for its chats: the database, the wake-ups, the event
    writer, the starts' group commit, and one for the answers saved without their events."""

    db: Database
    signals: Signals
    writer: EventWriter
    starts: TurnStarts
    answers: GroupCommit[Message, None]


Chat = Callable[[Parts, str, str], Awaitable[None]]


def _answer(conversation_id: str, message_id: str) -> Message:
    return assistant_message(
        conversation_id=conversation_id, message_id=message_id, content=ANSWER,
        tool_calls=[], tool_results=[], usage=RunUsage(30, 10, 3, 2).json(),
    )  # fmt: skip


async def _add_answers(db: Database, driver: object, rows: Sequence[Message]) -> list[None]:
    await run_store.write_ends(db, driver, rows, {}, {})
    return [None] * len(rows)


async def _user_message(parts: Parts, user_id: str, message_id: str) -> None:
    """The two messages as the service saves them, the chats that start or end together in
    shared transactions (`db.group_commit`), without the run or its events."""
    started = await parts.starts.start(TurnStart(user_id, None, QUESTION))
    assert started is not None
    # A chat sends message_start with storage or without: its JSON is not storage's.
    event_data(message_start(started.conversation_id, message_id))
    # The chat's pauses for its provider, as in the other paths: waking after a pause costs a
    # lone chat ~0.7 ms of CPU each (cold caches), which is not its storage's.
    for _ in _bursts(message_id):
        await asyncio.sleep(REPLY_GAP_S)
    message = _answer(started.conversation_id, message_id)
    await parts.answers.submit(message)
    event_data(message_complete(message_json(message)))


async def _with_writer(parts: Parts, user_id: str, message_id: str) -> None:
    started = await parts.starts.start(TurnStart(user_id, None, QUESTION, answer_id=message_id))
    assert started is not None
    run = RunRecord(parts.db, parts.signals, parts.writer, message_id)
    run.began()
    for burst in _bursts(message_id):
        run.waiting()  # as the agent does before each provider call
        await asyncio.sleep(REPLY_GAP_S)
        for data in burst:
            run.record(data)
    # As the agent ends an answer: the message, the last events and the run's end in one
    # write (`RunRecord.finish_with`), shared with the answers ending meanwhile.
    message = _answer(started.conversation_id, message_id)
    complete = event_data(message_complete(message_json(message)))
    await run.finish_with(complete, run_store.DONE, message)


async def _rounds(url: str, user_id: str, chats: int, limit: float) -> dict[str, list[float]]:
    """Each path's CPU per chat with `chats` at once, round by round, the paths in turn, until
    the storage's verdict against `limit` (CPU per chat) is clear or `ROUNDS` are done."""
    paths = {"u": _user_message, "a": _with_writer}
    spent: dict[str, list[float]] = {tag: [] for tag in paths}
    async with _parts(url) as parts:
        # Pools and statements. x1's chats, one at a time, reuse the connections the warm-up
        # opened: its paths warm them in turn, as before. The other levels' chats open many,
        # most of them cold either way: their paths warm up at once (in turn, the pauses for
        # the provider cost 1.2 s more per level).
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
    signals = Signals(db, on_stop=lambda _: None)
    writer = EventWriter(db, signals)
    answers = GroupCommit(db, partial(_add_answers, db), "bench-answers", driver=True)
    try:
        yield Parts(db, signals, writer, TurnStarts(db), answers)
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
