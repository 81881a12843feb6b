"""Write a side effect as a durable job inside the caller's transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession
from structlog.contextvars import get_contextvars

from controlcenter.db import new_id, utcnow
from controlcenter.outbox.kinds import JobKind
from controlcenter.outbox.models import PENDING, OutboxJob

REQUEST_ID = "requestId"


def enqueue(db: AsyncSession, kind: JobKind, payload: dict[str, Any]) -> OutboxJob:
    """Add a pending job to `db`; it is committed (or rolled back) with the caller's data.
    Refuses an undeclared kind.

    Nothing is sent here: the worker delivers the job later, so a CRM outage or a crash
    between commit and delivery delays the side effect but never loses it.
    """
    if not isinstance(kind, JobKind):
        raise ValueError(f"unknown outbox job kind: {kind}")
    # The request that caused the job, so that its delivery's records carry the same id.
    request_id = get_contextvars().get("request_id")
    now = utcnow()
    job = OutboxJob(
        id=new_id(),
        kind=kind,
        payload={**payload, REQUEST_ID: request_id} if request_id else dict(payload),
        status=PENDING,
        attempts=0,
        next_attempt_at=now,
        created_at=now,
        updated_at=now,
    )
    db.add(job)
    return job
