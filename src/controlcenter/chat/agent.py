"""One chat turn after the pre-stream checks: conversation, user message, the
agentic loop between the provider and the tools, the assistant message, and the events."""

from __future__ import annotations

import asyncio
import traceback
from dataclasses import dataclass, replace

from sqlalchemy.exc import SQLAlchemyError

from controlcenter.admin_settings.names import SettingName
from controlcenter.admin_settings.usable import UnusableSettingError, check_credential
from controlcenter.auth.models import UserRecord
from controlcenter.chat import events
from controlcenter.chat.channel import EventChannel
from controlcenter.chat.context import ChatContext
from controlcenter.chat.context_budget import fit
from controlcenter.chat.conversations import TurnRefusedError
from controlcenter.chat.models import APPROVED, ASSISTANT, DONE, FAILED, INTERRUPTED, STOPPED
from controlcenter.chat.policy import DEFAULT_CONTEXT_TOKEN_BUDGET
from controlcenter.chat.run.record import RunRecord
from controlcenter.chat.run.runs import ChatRuns
from controlcenter.common.logs import get_logger
from controlcenter.common.secrets import MASK, redact
from controlcenter.llm.types import (
    AssistantTurn,
    ToolOutcome,
    ToolResultsTurn,
    Turn,
    UserTurn,
)
from controlcenter.providers.base import Ask, Provider, ProviderError
from controlcenter.providers.history import TIMEOUT_MESSAGE

log = get_logger(__name__)

MAX_ITERATIONS = 10  # provider calls per turn at most
CONVERSATION_NOT_FOUND = "Conversation not found"
UNEXPECTED = "An unexpected error occurred"
DENIED_BY_USER = "Denied by the user"  # the result error of a denied or unanswered write
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
    conversation_id: str | None  # None: a new conversation
    provider: str
    key_setting: SettingName  # where `api_key` comes from, named when it is unusable
    api_key: str
    token_deltas: bool = False  # `?deltas=tokens`: the provider in streaming mode
    approve_writes: bool = False  # the policy's `toolApproval: "writes"`
    approval_timeout_s: float = 600.0
    fallback: Fallback | None = None
    context_token_budget: int = DEFAULT_CONTEXT_TOKEN_BUDGET
    replace: str | None = None  # what of the conversation's last turn it replaces

    @property
    def secrets(self) -> tuple[str, ...]:
        """The keys this chat may use: taken out of anything it logs or sends."""
        if self.fallback is None:
            return (self.api_key,)
        return (self.api_key, self.fallback.api_key)


async def run_chat(
    provider: Provider, context: ChatContext, turn: ChatTurn, channel: EventChannel, runs: ChatRuns
) -> None:
    """Runs to the end whatever happens to the connection (a client that went away resumes
    from the stored events); the channel is closed and the run's end stored in every case."""
    run: RunRecord | None = None
    status = FAILED
    failure: events.Event | None = None
    try:
        # Before anything is saved: a key that cannot travel in a header fails every call.
        check_credential(turn.key_setting, turn.api_key)
        run = await runs.begin(
            turn.user.id, turn.conversation_id, turn.message, channel, turn.replace
        )
        if run is None:
            channel.send(events.error(CONVERSATION_NOT_FOUND))  # belongs to no message
        else:
            await _answer(provider, context, turn, run)
            status = STOPPED if run.stopped else DONE
    except ProviderError as exc:
        code = str(exc.status_code) if exc.status_code is not None else None
        message = redact(exc.message, *turn.secrets, mask=MASK)
        log.warning("provider error", provider=turn.provider, status=code, message=message)
        failure = events.error(message or UNEXPECTED, code)
    except TurnRefusedError as exc:  # nothing was saved; the client asked for what cannot be
        failure = events.error(str(exc))
    except UnusableSettingError as exc:
        # An operator's mistake, not a bug: one line naming the setting, no traceback.
        log.warning("chat refused: configuration error", setting=exc.name, problem=exc.reason)
        failure = events.error(str(exc))
    except Exception as exc:
        # The traceback is logged as text so that the key can be taken out of it as well.
        trace = "".join(traceback.format_exception(exc))
        log.error(
            "chat failed", provider=turn.provider, traceback=redact(trace, *turn.secrets, mask=MASK)
        )
        shown = UNEXPECTED if isinstance(exc, SQLAlchemyError) else str(exc)  # no SQL shown
        failure = events.error(redact(shown, *turn.secrets, mask=MASK) or UNEXPECTED)
    except asyncio.CancelledError:
        # Cancelled at shutdown: its stream ends as a dead process's would, and the answer so
        # far is saved as interrupted by another process (or the next start).
        status = INTERRUPTED
        failure = events.error(events.ANSWER_INTERRUPTED)
        raise
    finally:
        if run is None:
            if failure is not None:
                channel.send(failure)
        else:
            run.dismiss()
            try:
                # The failure reaches the client once the run's end is stored: a client that
                # reads it may at once answer the message again, and is never told that this
                # answer still runs. At once when the answer's write ended the run already.
                await run.finish(status, failure)
            except Exception as exc:
                log.error("chat run's end not stored", error=redact(str(exc)))
                channel.end_unstored(failure)  # live only: the stream still ends with its error
        channel.close()


async def _answer(provider: Provider, context: ChatContext, turn: ChatTurn, run: RunRecord) -> None:
    """The loop between the provider and the tools, then the assistant message."""
    toolbox, acting_for = await context.toolbox(turn.user)
    # Where the tools' writes are made, for their ledger: this conversation and answer.
    acting_for = replace(
        acting_for, conversation_id=run.conversation_id, message_id=run.message_id, run=run
    )
    history = [
        AssistantTurn(text.content) if text.role == ASSISTANT else UserTurn(text.content)
        for text in run.history
    ]
    turns: list[Turn] = [*history, UserTurn(run.message)]
    # `?deltas=tokens`: the provider in streaming mode, each piece of text an event.
    streamed: list[str] = []

    def on_text(piece: str) -> None:
        streamed.append(piece)
        run.send(events.content_delta(piece))

    for _ in range(MAX_ITERATIONS):
        streamed.clear()
        sent = fit(history, turns[len(history) :], turn.context_token_budget)
        run.waiting()  # the last iteration's events written now, not after a wake-up of their own
        asking = Ask(SYSTEM_PROMPT, sent, toolbox.specs, on_text if turn.token_deltas else None)
        try:
            reply = await run.unless_stopped(asking.of(provider, turn.api_key))
        except ProviderError as exc:
            other = turn.fallback
            if other is None or streamed or not _passing(exc):
                raise
            run.send(events.provider_fallback(turn.provider, other.name))
            reply = await run.unless_stopped(asking.of(other.provider, other.api_key))
        if reply is None:  # stopped: the text already sent is kept
            break
        run.count_provider_call(reply.input_tokens, reply.output_tokens)
        if reply.text and not streamed:
            run.send(events.content_delta(reply.text))
        if not reply.tool_calls:
            break
        results = []
        for call in reply.tool_calls:
            if run.stopped:  # a tool call under way finishes; none starts after a stop
                break
            shown = toolbox.original(call)
            run.send(events.tool_call_start(shown))
            if turn.approve_writes and toolbox.writes(call):
                await run.ask_approval(call.id)  # stored first: the event invites an answer
                run.send(events.tool_approval_required(shown))
                answer = await run.approval(call.id, turn.approval_timeout_s)
                if answer != APPROVED:
                    refused = STOPPED_BEFORE_RUNNING if answer == STOPPED else DENIED_BY_USER
                    result = ToolOutcome(call.id, False, error=refused)
                    results.append(result)
                    run.send(events.tool_result(result))
                    continue
            run.count_tool_call()
            result = await toolbox.execute(call, acting_for)
            results.append(result)
            run.send(events.tool_result(result))
        if run.stopped:
            break
        turns.append(AssistantTurn(reply.text, reply.tool_calls))
        turns.append(ToolResultsTurn(tuple(results)))

    await run.complete()


def _passing(exc: ProviderError) -> bool:
    """An error the other provider may not have: 429, 5xx or a timeout, as left
    after the SDK's own retries."""
    status = exc.status_code
    if status is None:
        return exc.message == TIMEOUT_MESSAGE
    return status == 429 or status >= 500
