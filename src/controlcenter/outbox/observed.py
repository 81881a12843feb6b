"""Outbox deliveries as operators see them: each attempt counted by its job's
kind and the state it leaves the job in, and timed. Wraps the handlers the worker is given."""

from __future__ import annotations

import time
from collections.abc import Mapping

from controlcenter.observability import tracing
from controlcenter.observability.metrics import OUTBOX_DURATION, OUTBOX_JOBS
from controlcenter.outbox.errors import MissingSettings, PermanentError
from controlcenter.outbox.worker import ClaimedJob, Handler


def observed_handlers(handlers: Mapping[str, Handler]) -> dict[str, Handler]:
    return {kind: _observed(kind, handler) for kind, handler in handlers.items()}


def _observed(kind: str, handler: Handler) -> Handler:
    async def deliver(job: ClaimedJob) -> None:
        started = time.perf_counter()
        state = "failed"
        with tracing.span("outbox delivery", **{"outbox.kind": kind}) as current:
            try:
                await handler(job)
                state = "delivered"
            except MissingSettings:
                state = "waiting"
                raise
            except PermanentError:
                state = "dead"
                raise
            finally:
                if state in {"failed", "dead"}:
                    tracing.fail(current, state)
                OUTBOX_JOBS.labels(kind, state).inc()
                OUTBOX_DURATION.labels(kind).observe(time.perf_counter() - started)

    return deliver
