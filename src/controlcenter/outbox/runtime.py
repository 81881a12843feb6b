"""Running the worker: inside `controlcenter serve`, or alone as `controlcenter worker`."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controlcenter.common.logs import get_logger
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.outbox.worker import Handler, OutboxWorker

log = get_logger(__name__)


@dataclass
class RunningWorker:
    worker: OutboxWorker
    task: asyncio.Task[None]

    async def stop(self) -> None:
        """Stop claiming and let deliveries in flight finish (within the grace period)."""
        await self.worker.stop()
        try:
            await self.task
        except Exception:
            log.exception("outbox worker ended with an error")


def start_worker(
    db: Database,
    config: Config,
    handlers: Mapping[str, Handler],
    *,
    wake_on: Iterable[str],
    name: str = "worker",
) -> RunningWorker:
    """Start the worker, with a handler per job kind, as a task of the running event loop;
    a change of a `wake_on` topic makes the waiting jobs due (`OutboxWorker`)."""
    worker = OutboxWorker(db, config, handlers, name=name, wake_on=wake_on)
    task = asyncio.create_task(worker.run(), name=f"outbox-{name}")
    return RunningWorker(worker=worker, task=task)


async def run_until_signalled(
    db: Database, config: Config, handlers: Mapping[str, Handler], *, wake_on: Iterable[str]
) -> None:
    """The `controlcenter worker` process: run until SIGTERM or SIGINT, then stop gracefully."""
    running = start_worker(db, config, handlers, wake_on=wake_on)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    signalled = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({running.task, signalled}, return_when=asyncio.FIRST_COMPLETED)
        log.info("outbox worker stopping")
    finally:
        signalled.cancel()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await running.stop()
