"""A message's events again, for a client that reconnects: the stored ones after
the client's last, then, while the run goes on in whichever process or instance, each new one
as it is stored, until the message's last event."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from controlcenter.chat.events import frame_of, is_last
from controlcenter.chat.models import RUNNING
from controlcenter.chat.run.stored import events_after, run_owner_status
from controlcenter.chat.signals import Signals
from controlcenter.db import Database

EVENT_ID_PATTERN = r"^\s*([^:\s]{1,64}:[0-9]{1,9})?\s*$"
"""What `after_event` accepts in the `Last-Event-ID` header, for the interface description:
empty, or an event's id (`<messageId>:<n>`, with its message's id), spaces around it ignored."""
_EVENT_ID = re.compile(r"^(?P<message>[^:\s]{1,64}):(?P<n>\d{1,9})$")


class InvalidLastEventIdError(ValueError):
    pass


def after_event(message_id: str, last_event_id: str | None, after: int | None) -> int:
    """The number of the client's last event: the `Last-Event-ID` header wins over `?after`.

    Raises InvalidLastEventIdError when the header is not one of this message's ids."""
    if last_event_id is None or last_event_id.strip() == "":
        return after or 0
    match = _EVENT_ID.match(last_event_id.strip())
    if match is None or match["message"] != message_id:
        raise InvalidLastEventIdError(last_event_id)
    return int(match["n"])


async def owned_run(db: Database, message_id: str, user_id: str) -> bool:
    found = await run_owner_status(db, message_id)
    return found is not None and found[0] == user_id


async def tail(db: Database, signals: Signals, message_id: str, after: int) -> AsyncIterator[bytes]:
    """Frames (always with ids) of the events after `after`, live until the last one."""
    last = after
    with signals.watch(message_id) as woken:
        await signals.listen()
        while True:
            woken.clear()
            rows = await events_after(db, message_id, last)
            for n, data in rows:
                yield frame_of(data, f"{message_id}:{n}")
                last = n
                if is_last(data):
                    return
            if not rows:
                found = await run_owner_status(db, message_id)
                if found is None or found[1] != RUNNING:
                    # Its end was stored with its last events: anything left is read now.
                    for n, data in await events_after(db, message_id, last):
                        yield frame_of(data, f"{message_id}:{n}")
                    return
                # Woken by this process's writer, a notification or the process's one poll
                # (`chat.signals`): a waiting reader costs no query of its own.
                await woken.wait()
