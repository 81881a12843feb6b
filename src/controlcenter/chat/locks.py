"""The one order in which every writer takes a conversation's rows.

A transaction that writes rows of a conversation (its messages, its runs and their events,
approvals and liveness rows) or deletes it first locks the conversation's own row, then
touches the rest: the runs (`chat_runs`), the messages, the events, the approvals, the
liveness rows (`running_messages`). Several conversations are locked in the order of their
ids. A writer that holds no conversation's lock touches one kind of row at most (a stop
flag, an approval's answer, a run's events, a heartbeat), so no two writers ever wait on
each other in a circle, which PostgreSQL would end by failing one of them ("deadlock
detected"): a deletion racing an answer's end now waits for it, or the other way round.

The deletion locks the row for update (it removes it); every other writer locks it for a
"no key update", which still lets other transactions insert rows that refer to it. SQLite
has no row locks: each write transaction there holds the whole database (`BEGIN
IMMEDIATE`), and these clauses are left out of its SQL.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from controlcenter.chat.models import ConversationRow

# Built once, run with each transaction's ids.
_HOLD = (
    select(ConversationRow.id)
    .where(ConversationRow.id.in_(bindparam("ids", expanding=True)))
    .order_by(ConversationRow.id)
    .with_for_update(key_share=True)
)


def hold_conversations(session: Session, conversation_ids: Iterable[str]) -> set[str]:
    """In the caller's transaction, before anything else of these conversations is written:
    their rows locked, in the order of their ids. The ids that still exist."""
    ids = sorted(set(conversation_ids))
    if not ids:
        return set()
    return set(session.scalars(_HOLD, {"ids": ids}))


def hold_owned(
    session: Session, user_id: str, conversation_id: str, *, deleting: bool = False
) -> ConversationRow | None:
    """In the caller's transaction, first: the caller's conversation with its row locked (for
    its deletion with `deleting`); None when it is not theirs."""
    return session.scalar(
        select(ConversationRow)
        .where(ConversationRow.id == conversation_id, ConversationRow.user_id == user_id)
        .with_for_update(key_share=not deleting)
    )
