"""One chat turn's run after the pre-stream checks, whatever happens to the connection: the
run begun (conversation, user message, `message_start`), answered by the agent's loop, and
ended in every case, a failure as the stream's last event.

It calls down only: the process's runs for a new run, the agent for the answer, the run for its
end.
"""

from __future__ import annotations

import asyncio
import traceback

from sqlalchemy.exc import SQLAlchemyError

from controlcenter.admin_settings.usable import UnusableSettingError, check_credential
from controlcenter.chat import events
from controlcenter.chat.agent import ChatTurn, answer
from controlcenter.chat.channel import EventChannel
from controlcenter.chat.context import ChatContext
from controlcenter.chat.conversations import TurnRefusedError
from controlcenter.chat.models import DONE, FAILED, INTERRUPTED, STOPPED
from controlcenter.chat.run.record import RunRecord
from controlcenter.chat.run.runs import ChatRuns
from controlcenter.common.logs import get_logger
from controlcenter.common.secrets import MASK, redact
from controlcenter.providers.base import Provider, ProviderError

log = get_logger(__name__)

CONVERSATION_NOT_FOUND = "Conversation not found"
UNEXPECTED = "An unexpected error occurred"


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
            await answer(provider, context, turn, run)
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
