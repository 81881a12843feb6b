"""One chat turn, SPEC 4.2 "processing after the checks": conversation, user message, the
agentic loop between the provider and the tools, the assistant message, and the events."""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from controlcenter.admin_settings.usable import UnusableSettingError, check_credential
from controlcenter.auth.models import UserRecord
from controlcenter.chat import events
from controlcenter.chat.context import ChatContext
from controlcenter.chat.context_budget import fit
from controlcenter.chat.conversations import (
    ASSISTANT,
    StoredText,
    TurnStart,
    assistant_message,
    new_message_id,
    replace_interrupted,
)
from controlcenter.chat.policy import DEFAULT_CONTEXT_TOKEN_BUDGET
from controlcenter.chat.recorder import RunRecord
from controlcenter.chat.run_store import APPROVED, DONE, FAILED, STOPPED
from controlcenter.chat.schemas import API_KEY_SETTINGS, message_json
from controlcenter.chat.stream import ChatRuns, EventChannel
from controlcenter.common.logs import get_logger
from controlcenter.common.secrets import MASK, redact
from controlcenter.db import Database, refused_row
from controlcenter.llm.types import (
    AssistantTurn,
    ProviderReply,
    ToolResult,
    ToolResultsTurn,
    ToolSpec,
    Turn,
    UserTurn,
)
from controlcenter.providers.base import Provider, ProviderError, StreamingProvider
from controlcenter.providers.history import TIMEOUT_MESSAGE

log = get_logger(__name__)

MAX_ITERATIONS = 10  # SPEC 8
CONVERSATION_NOT_FOUND = "Conversation not found"
UNEXPECTED = "An unexpected error occurred"
DENIED_BY_USER = "Denied by the user"  # CONTRACT 11
STOPPED_BEFORE_RUNNING = "Stopped by the user before the tool ran"
SYSTEM_PROMPT = (
    "You are the AI assistant of a commercial real estate CRM used by brokers. "
    "Use the available tools to fetch real data from the CRM instead of guessing or "
    "inventing it. Be helpful, professional and concise. "
    "When you lack a tool or the information to do what is asked, say so plainly and "
    "explain what you can help with instead."
)


@dataclass(frozen=True)
class Fallback:
    """The other provider, when the policy's `fallback` is on and its key is set."""

    name: str
    provider: Provider
    api_key: str


@dataclass(frozen=True)
class ChatTurn:
    """A request that passed the pre-stream checks."""

    user: UserRecord
    message: str
    conversation_id: Any  # the raw request value; None when absent
    provider: str
    api_key: str
    token_deltas: bool = False  # CONTRACT 11 `?deltas=tokens`: the provider in streaming mode
    approve_writes: bool = False  # CONTRACT 11: the policy's `toolApproval: "writes"`
    approval_timeout_s: float = 600.0
    fallback: Fallback | None = None
    context_token_budget: int = DEFAULT_CONTEXT_TOKEN_BUDGET

    @property
    def secrets(self) -> tuple[str, ...]:
        """The keys this chat may use: taken out of anything it logs or sends."""
        if self.fallback is None:
            return (self.api_key,)
        return (self.api_key, self.fallback.api_key)


async def run_chat(
    db: Database,
    provider: Provider,
    context: ChatContext,
    turn: ChatTurn,
    channel: EventChannel,
    runs: ChatRuns,
) -> None:
    """Runs to the end whatever happens to the connection (a client that went away resumes
    from the stored events); the channel is closed and the run's end stored in every case."""
    status = FAILED
    try:
        await _process(db, provider, context, turn, channel, runs)
        status = STOPPED if channel.run is not None and channel.run.stopped else DONE
    except ProviderError as exc:
        code = str(exc.status_code) if exc.status_code is not None else None
        message = redact(exc.message, *turn.secrets, mask=MASK)
        log.warning("provider error", provider=turn.provider, status=code, message=message)
        channel.send(events.error(message or UNEXPECTED, code))
    except UnusableSettingError as exc:
        # An operator's mistake, not a bug: one line naming the setting, no traceback.
        log.warning("chat refused: configuration error", setting=exc.name, problem=exc.reason)
        channel.send(events.error(str(exc)))
    except Exception as exc:
        # The traceback is logged as text so that the key can be taken out of it as well.
        trace = "".join(traceback.format_exception(exc))
        log.error(
            "chat failed", provider=turn.provider, traceback=redact(trace, *turn.secrets, mask=MASK)
        )
        channel.send(events.error(redact(str(exc), *turn.secrets, mask=MASK) or UNEXPECTED))
    finally:
        channel.close()
        if channel.run is not None:
            await _finish(runs, channel.run, status)


async def _finish(runs: ChatRuns, run: RunRecord, status: str) -> None:
    runs.forget(run)
    try:
        await run.finish(status)
    except Exception as exc:
        log.error("chat run's end not stored", error=redact(str(exc)))


async def _process(
    db: Database,
    provider: Provider,
    context: ChatContext,
    turn: ChatTurn,
    channel: EventChannel,
    runs: ChatRuns,
) -> None:
    # Before anything is saved: a key that cannot travel in a header fails every call.
    check_credential(API_KEY_SETTINGS[turn.provider], turn.api_key)
    message_id = new_message_id()
    started = await runs.starts.start(
        TurnStart(turn.user.id, turn.conversation_id, turn.message, answer_id=message_id)
    )
    if started is None:
        channel.send(events.error(CONVERSATION_NOT_FOUND))
        return
    run = await runs.record(message_id)
    channel.begin(run, events.message_start(started.conversation_id, message_id))

    toolbox, acting_for = await context.toolbox(turn.user)
    history = [*map(_as_turn, started.history)]
    new_message = UserTurn(turn.message)
    turns: list[Turn] = [*history, new_message]

    content = ""
    tool_calls: list[dict[str, Any]] = []
    tool_results: list[dict[str, Any]] = []
    for _ in range(MAX_ITERATIONS):
        streamed: list[str] = []
        sent = fit(history, turns[len(history) :], turn.context_token_budget)
        run.waiting()  # the last round's events written now, not after a wake-up of their own
        try:
            reply = await run.unless_stopped(
                _ask(provider, turn.api_key, turn, sent, toolbox.specs, channel, streamed)
            )
        except ProviderError as exc:
            other = turn.fallback
            if other is None or streamed or not _passing(exc):
                raise
            channel.send(events.provider_fallback(turn.provider, other.name))
            reply = await run.unless_stopped(
                _ask(other.provider, other.api_key, turn, sent, toolbox.specs, channel, streamed)
            )
        if reply is None:  # stopped: the text already sent is kept
            content += "".join(streamed)
            break
        run.count_provider_call(reply.input_tokens, reply.output_tokens)
        if reply.text:
            content += reply.text
            if not streamed:
                channel.send(events.content_delta(reply.text))
        if not reply.tool_calls:
            break
        results = []
        for call in reply.tool_calls:
            if run.stopped:  # a tool call under way finishes; none starts after a stop
                break
            shown = toolbox.original(call)
            tool_calls.append(shown.to_json())
            channel.send(events.tool_call_start(shown))
            if turn.approve_writes and toolbox.writes(call):
                await run.ask_approval(call.id)  # stored first: the event invites an answer
                channel.send(events.tool_approval_required(shown))
                answer = await run.approval(call.id, turn.approval_timeout_s)
                if answer != APPROVED:
                    refused = STOPPED_BEFORE_RUNNING if answer == STOPPED else DENIED_BY_USER
                    result = ToolResult(call.id, False, error=refused)
                    results.append(result)
                    tool_results.append(result.to_json())
                    channel.send(events.tool_result(result))
                    continue
            run.count_tool_call()
            result = await toolbox.execute(call, acting_for)
            results.append(result)
            tool_results.append(result.to_json())
            channel.send(events.tool_result(result))
        if run.stopped:
            break
        turns.append(AssistantTurn(reply.text, reply.tool_calls))
        turns.append(ToolResultsTurn(tuple(results)))

    message = assistant_message(
        conversation_id=started.conversation_id,
        message_id=message_id,
        content=content,
        tool_calls=tool_calls,
        tool_results=tool_results,
        usage=run.usage.json(),
    )
    complete = events.message_complete(message_json(message), stopped=run.stopped)
    status = STOPPED if run.stopped else DONE
    try:
        # One write: the message, the events still pending, message_complete and the run's
        # end (a lone chat's last two transactions were the message's and the end's).
        await channel.end_with(complete, status, message)
    except Exception as exc:
        # Closed as interrupted by another process meanwhile: its copy is replaced, and the
        # last events go the writer's way (a refusal for any other reason stands).
        if not refused_row(exc) or not await replace_interrupted(db, message):
            raise
        channel.send(events.message_complete(message_json(message), stopped=run.stopped))


def _passing(exc: ProviderError) -> bool:
    """An error the other provider may not have (CONTRACT 11): 429, 5xx or a timeout, as left
    after the SDK's own retries."""
    status = exc.status_code
    if status is None:
        return exc.message == TIMEOUT_MESSAGE
    return status == 429 or status >= 500


def _ask(
    provider: Provider,
    api_key: str,
    turn: ChatTurn,
    turns: list[Turn],
    tools: Sequence[ToolSpec],
    channel: EventChannel,
    streamed: list[str],
) -> Awaitable[ProviderReply]:
    """One provider call: in streaming mode with `?deltas=tokens` (each piece of text is a
    `content_delta` as it arrives, and kept in `streamed`), else SPEC's one reply."""
    stream = getattr(provider, "stream", None) if turn.token_deltas else None
    if stream is None:
        return provider.complete(api_key=api_key, system=SYSTEM_PROMPT, turns=turns, tools=tools)

    def on_text(piece: str) -> None:
        streamed.append(piece)
        channel.send(events.content_delta(piece))

    streaming = cast(StreamingProvider, provider)
    return streaming.stream(
        api_key=api_key, system=SYSTEM_PROMPT, turns=turns, tools=tools, on_text=on_text
    )


def _as_turn(stored: StoredText) -> Turn:
    if stored.role == ASSISTANT:
        return AssistantTurn(text=stored.content)
    return UserTurn(text=stored.content)
