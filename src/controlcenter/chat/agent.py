"""The agentic loop of one chat turn: the provider asked, the tools run, the events sent to
the run, and the assistant message at its end (`chat.turn` begins and ends the run around
it)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from controlcenter.admin_settings.names import SettingName
from controlcenter.auth.models import UserRecord
from controlcenter.chat import events
from controlcenter.chat.context import ChatContext
from controlcenter.chat.context_budget import fit
from controlcenter.chat.models import APPROVED, ASSISTANT, STOPPED
from controlcenter.chat.policy import DEFAULT_CONTEXT_TOKEN_BUDGET
from controlcenter.chat.run.record import RunRecord
from controlcenter.common.logs import get_logger
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


async def answer(provider: Provider, context: ChatContext, turn: ChatTurn, run: RunRecord) -> None:
    """The loop between the provider and the tools, then the assistant message (the run's
    end with it). Raises what a provider, a tool or the database raised."""
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
