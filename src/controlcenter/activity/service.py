"""The ledger as its readers see it (the broker's own entries, every entry for administrators)
and the undo of an entry."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from controlcenter.activity.inverses import ChangedSinceError, Done, undoable_of, write_of
from controlcenter.activity.models import (
    DONE,
    PENDING,
    UNDOING,
    UNDONE,
    ActivityEntry,
)
from controlcenter.admin_settings.names import AGENCY_API_KEY, AGENCY_ID
from controlcenter.admin_settings.store import SettingsStore
from controlcenter.admin_settings.usable import UnusableSettingError
from controlcenter.auth.models import UserRecord
from controlcenter.crm.broker import broker_client
from controlcenter.crm.errors import CrmError
from controlcenter.crm.tools import NOT_CONNECTED, tool_error
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database, utcnow
from controlcenter.db.pagination import newest_first
from controlcenter.db.text_match import lowered

ENTRY_NOT_FOUND = "Entry not found"
CHANGED_SINCE = "Changed since"
ALREADY_UNDONE = "Already undone"
CANNOT_BE_UNDONE = "Cannot be undone"
UNDO_PREFIX = "Undo: "


class UndoRefusedError(Exception):
    """An undo that is refused: `status` and the words of the answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def state(entry: ActivityEntry) -> str:
    """The API's `state`: a write (or an undo) that never finished is `unknown`."""
    return "unknown" if entry.status in (PENDING, UNDOING) else entry.status


def done_of(entry: ActivityEntry) -> Done:
    return Done(entry.arguments, entry.before, entry.result)


def undoable(entry: ActivityEntry) -> bool:
    """Whether an undo may be asked for. An entry left under way by a process that died is
    undoable when its write can be checked by reading the object (an update: the undo reads it
    first and goes on only when it holds what the write would have left)."""
    if entry.undo_of is not None or entry.status not in (DONE, PENDING):
        return False
    return undoable_of(entry.tool, done_of(entry))


async def list_entries(
    db: Database,
    user_id: str | None,
    *,
    limit: int,
    after: tuple[datetime, str] | None = None,
    containing: str | None = None,
    conversation_id: str | None = None,
) -> tuple[list[ActivityEntry], bool]:
    """A page of entries, newest first, and whether more follow: the user's (`user_id`), or
    everyone's (None).
    `containing`: only those whose tool, title or summary holds it, whatever the case."""
    query = select(ActivityEntry)
    if user_id is not None:
        query = query.where(ActivityEntry.user_id == user_id)
    if conversation_id is not None:
        query = query.where(ActivityEntry.conversation_id == conversation_id)
    if containing:
        needle = containing.lower()
        query = query.where(
            or_(
                *(
                    lowered(column).contains(needle, autoescape=True)
                    for column in (ActivityEntry.tool, ActivityEntry.title, ActivityEntry.summary)
                )
            )
        )
    return await db.run_read(
        newest_first, query, ActivityEntry.created_at, ActivityEntry.id, limit=limit, after=after
    )


@dataclass(frozen=True)
class Undo:
    """Undoes entries with the owner's own CRM client."""

    db: Database
    settings: SettingsStore
    crm: CrmTransport

    async def undo(self, user: UserRecord, entry_id: str) -> ActivityEntry:
        """The new entry that undid `entry_id`. Raises UndoRefusedError."""
        entry = await self.db.run_read(_read_entry, entry_id)
        if entry is None or entry.user_id != user.id:
            raise UndoRefusedError(404, ENTRY_NOT_FOUND)
        if entry.status in (UNDONE, UNDOING):
            raise UndoRefusedError(409, ALREADY_UNDONE)
        if not undoable(entry):
            raise UndoRefusedError(422, CANNOT_BE_UNDONE)
        was = entry.status
        if not await self._claim(entry.id, was):  # another undo of it got there first
            raise UndoRefusedError(409, ALREADY_UNDONE)
        try:
            summary = await self._reverse(user, entry)
        except BaseException:
            await self._set(entry.id, UNDOING, was)
            raise
        undone = ActivityEntry(
            user_id=user.id,
            conversation_id=entry.conversation_id,
            message_id=entry.message_id,
            tool_call_id=None,
            created_at=utcnow(),
            tool=entry.tool,
            title=UNDO_PREFIX + entry.title,
            summary=summary,
            arguments=entry.arguments,
            status=DONE,
            undo_of=entry.id,
        )
        await self.db.run_write(_record_undo, undone, entry.id)
        return undone

    async def _reverse(self, user: UserRecord, entry: ActivityEntry) -> str:
        settings = await self.settings.get_many((AGENCY_API_KEY, AGENCY_ID))
        try:
            client = await broker_client(settings, self.crm, user)
        except UnusableSettingError as exc:
            raise UndoRefusedError(502, str(exc)) from exc
        if client is None:
            raise UndoRefusedError(502, NOT_CONNECTED)
        try:
            return await write_of(entry.tool).undo(client, done_of(entry))
        except ChangedSinceError as exc:
            raise UndoRefusedError(409, CHANGED_SINCE) from exc
        except CrmError as exc:
            raise UndoRefusedError(502, str(tool_error(exc, "record"))) from exc

    async def _claim(self, entry_id: str, was: str) -> bool:
        return await self._set(entry_id, was, UNDOING)

    async def _set(self, entry_id: str, was: str, now: str) -> bool:
        return await self.db.run_write(_set_status, entry_id, was, now)


def _read_entry(session: Session, entry_id: str) -> ActivityEntry | None:
    return session.get(ActivityEntry, entry_id)


def _record_undo(session: Session, undone: ActivityEntry, entry_id: str) -> None:
    """The undo's entry added and the undone entry marked so, together."""
    session.add(undone)
    session.execute(update(ActivityEntry).where(ActivityEntry.id == entry_id).values(status=UNDONE))


def _set_status(session: Session, entry_id: str, was: str, now: str) -> bool:
    """Whether the entry's status went from `was` to `now` (False: it was not `was`)."""
    changed = session.execute(
        update(ActivityEntry)
        .where(ActivityEntry.id == entry_id, ActivityEntry.status == was)
        .values(status=now)
    )
    return bool(getattr(changed, "rowcount", 0) == 1)
