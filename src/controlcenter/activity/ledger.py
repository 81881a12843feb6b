"""The ledger's side of a tool call that writes: entered as under way before the call (with
the object's state read just before, for a built-in update), finished when the call ends.

The app hands a `Ledger` to the tool router (`tools.recording.WriteRecorder`), so every call a
chat makes to a tool that writes is recorded, whatever the tool's source."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from controlcenter.activity.inverses import Done, summary_of, write_of
from controlcenter.activity.models import DONE, FAILED, PENDING, ActivityEntry
from controlcenter.common.logs import get_logger
from controlcenter.crm.client import CrmClient
from controlcenter.crm.errors import CrmError
from controlcenter.db import Database, new_id
from controlcenter.llm.types import ToolInvocation, ToolOutcome
from controlcenter.tools.base import RunWrites, Tool, ToolContext

log = get_logger(__name__)

# Built once, run with each call's values: a statement built per call costs more CPU than
# the database takes to run it.
_ENTRIES = cast(Table, ActivityEntry.__table__)
_BEGIN = insert(_ENTRIES)
_FINISH = (
    update(_ENTRIES)
    .where(_ENTRIES.c.id == bindparam("entry"))
    .values(
        status=bindparam("status"),
        result=bindparam("result", type_=_ENTRIES.c.result.type),
        error=bindparam("error"),
        summary=bindparam("summary"),
    )
)


class Ledger:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def begin(
        self, tool: Tool, call: ToolInvocation, context: ToolContext
    ) -> LedgerRecord | None:
        if context.conversation_id is None:
            return None  # not a chat's call: nothing to keep it with
        before = await _before(tool.name, call.arguments, context.crm)
        title = tool.title or tool.name
        entry_id = new_id()
        entry = {
            "id": entry_id,
            "user_id": context.user_id,
            "conversation_id": context.conversation_id,
            "message_id": context.message_id,
            "tool_call_id": call.id,
            "tool": tool.name,
            "title": title,
            "summary": summary_of(tool.name, title, Done(call.arguments, before, None)),
            "arguments": call.arguments,
            "status": PENDING,
            "before": before,
        }
        try:
            await self._db.run_write(_execute, _BEGIN, entry)
        except SQLAlchemyError as exc:
            # The write still runs: the chat's own storage fails in the same way and says so.
            log.error("ledger entry not stored", tool=tool.name, error=type(exc).__name__)
            return None
        return LedgerRecord(
            self._db, entry_id, tool.name, title, call.arguments, before, context.run
        )


@dataclass(frozen=True)
class LedgerRecord:
    db: Database
    entry_id: str
    tool: str
    title: str
    arguments: dict[str, Any]
    before: dict[str, Any] | None
    run: RunWrites | None = None  # the chat's run, when the call is a chat's

    async def finish(self, outcome: ToolOutcome) -> None:
        result = outcome.result if outcome.success else None
        done = Done(self.arguments, self.before, result)
        finished = {
            "entry": self.entry_id,
            "status": DONE if outcome.success else FAILED,
            "result": result,
            "error": None if outcome.success else outcome.error,
            "summary": summary_of(self.tool, self.title, done),
        }
        if self.run is not None:
            # With the run's next events, the call's result among them: stored when the
            # result is, with no transaction of its own.
            self.run.store_with_events(_FINISH, finished)
            return
        try:
            await self.db.run_write(_execute, _FINISH, finished)
        except SQLAlchemyError as exc:
            log.error("ledger entry not finished", tool=self.tool, error=type(exc).__name__)


def _execute(session: Session, statement: Executable, params: dict[str, Any]) -> None:
    session.execute(statement, params)


async def _before(tool: str, arguments: dict[str, Any], crm: Any) -> dict[str, Any] | None:
    """The object as it is just before a built-in update: one GET through the broker's client
    (its rate limit included). None when there is nothing to read or the read fails (the
    write then runs all the same, and cannot be undone)."""
    try:
        where = write_of(tool).before_path(arguments)
    except KeyError:  # another source's tool of the same name: nothing known to read
        return None
    if where is None or not isinstance(crm, CrmClient):
        return None
    path, key = where
    try:
        answer = await crm.get(path)
    except CrmError as exc:
        log.warning("state before a write not read", tool=tool, status=exc.status)
        return None
    found = answer.get(key) if isinstance(answer, dict) else None
    return found if isinstance(found, dict) else None
