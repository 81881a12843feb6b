"""Write side effects as durable jobs inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, insert
from sqlalchemy.orm import Session
from structlog.contextvars import get_contextvars

from controlcenter.db import new_id, utcnow
from controlcenter.outbox.kinds import JobKind
from controlcenter.outbox.models import PENDING, OutboxJob

REQUEST_ID = "requestId"

# Built once: one Core INSERT of all the jobs a caller writes, on the session's connection,
# without the ORM's bulk insert around it.
_TABLE: Table = OutboxJob.__table__  # type: ignore[assignment]  # declared as a Table
_INSERT = insert(_TABLE)

Job = tuple[JobKind, dict[str, Any]]  # a kind and its payload
PendingJob = dict[str, Any]  # a job's row, ready to insert


def pending(*jobs: Job) -> list[PendingJob]:
    """The rows of `jobs`, pending; refuses an undeclared kind. Built by the caller before its
    unit of work (on SQLite nothing but the transaction's own statements runs while it holds the
    write lock), in the context of the request that caused them: each carries its request id, so
    that their deliveries' records carry the same id."""
    for kind, _ in jobs:
        if not isinstance(kind, JobKind):
            raise ValueError(f"unknown outbox job kind: {kind}")
    request_id = get_contextvars().get("request_id")
    now = utcnow()
    return [
        {
            "id": new_id(),
            "kind": kind,
            "payload": {**payload, REQUEST_ID: request_id} if request_id else dict(payload),
            "status": PENDING,
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
            "updated_at": now,
        }
        for kind, payload in jobs
    ]


def enqueue(session: Session, jobs: Sequence[PendingJob]) -> None:
    """Add `jobs` (from `pending`) to `session`'s transaction, in one statement; they are
    committed (or rolled back) with the caller's data.

    Nothing is sent here: the worker delivers the jobs later, so a CRM outage or a crash
    between commit and delivery delays the side effects but never loses them.
    """
    if jobs:
        session.connection().execute(_INSERT, list(jobs))
