"""Write a side effect as a durable job inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from structlog.contextvars import get_contextvars

from controlcenter.db import new_id, utcnow
from controlcenter.outbox.kinds import JobKind
from controlcenter.outbox.models import PENDING, OutboxJob

REQUEST_ID = "requestId"
_INSERT = insert(OutboxJob)  # built once: its cache key is then computed once


def enqueue(db: AsyncSession, kind: JobKind, payload: dict[str, Any]) -> OutboxJob:
    """Add a pending job to `db`; it is committed (or rolled back) with the caller's data.

    Nothing is sent here: the worker delivers the job later, so a CRM outage or a crash
    between commit and delivery delays the side effect but never loses it.
    """
    job = OutboxJob(**job_values(kind, payload, utcnow()))
    db.add(job)
    return job


def job_values(kind: JobKind, payload: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The columns of a new pending job (`enqueue`, `enqueue_all`): refuses an undeclared kind."""
    if not isinstance(kind, JobKind):
        raise ValueError(f"unknown outbox job kind: {kind}")
    # The request that caused the job, so that its delivery's records carry the same id.
    request_id = get_contextvars().get("request_id")
    return {
        "id": new_id(),
        "kind": kind,
        "payload": {**payload, REQUEST_ID: request_id} if request_id else dict(payload),
        "status": PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
        "updated_at": now,
    }


async def enqueue_all(db: AsyncConnection, jobs: Sequence[dict[str, Any]]) -> None:
    """Insert jobs built by `job_values` in one statement, inside the caller's transaction.

    For a hot path: one executemany on the transaction's connection instead of an ORM object
    per job and a unit-of-work flush, so the write transaction (and, on SQLite, the database's
    one write lock) is held for less time. Same durability as `enqueue`: the jobs commit or
    roll back with the caller's data.
    """
    if jobs:
        await db.execute(_INSERT, list(jobs))
