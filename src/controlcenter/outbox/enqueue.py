"""Write side effects as durable jobs inside the caller's transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession
from structlog.contextvars import get_contextvars

from controlcenter.db import new_id, utcnow
from controlcenter.outbox.kinds import JobKind
from controlcenter.outbox.models import PENDING, OutboxJob

REQUEST_ID = "requestId"

# Built once: one Core INSERT of all the jobs a caller writes, without ORM objects to flush.
_INSERT = insert(OutboxJob)

Job = tuple[JobKind, dict[str, Any]]  # a kind and its payload


async def enqueue(db: AsyncSession, *jobs: Job) -> None:
    """Add pending jobs to `db`'s transaction, in one statement; they are committed (or rolled
    back) with the caller's data. Refuses an undeclared kind, before anything is written.

    Nothing is sent here: the worker delivers the jobs later, so a CRM outage or a crash
    between commit and delivery delays the side effects but never loses them.
    """
    for kind, _ in jobs:
        if not isinstance(kind, JobKind):
            raise ValueError(f"unknown outbox job kind: {kind}")
    if not jobs:
        return
    # The request that caused the jobs, so that their deliveries' records carry the same id.
    request_id = get_contextvars().get("request_id")
    now = utcnow()
    rows = [
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
    await db.execute(_INSERT, rows)
