"""The served app opens its database connections before the first request (`Database.warm`):
on PostgreSQL each new connection costs a server process, authentication and the driver's
set-up, which the first burst of requests after a start paid while they waited."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest

from controlcenter.app import create_app
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.db.engine import WARM_CONNECTIONS


async def test_warm_opens_a_bursts_worth_of_connections_on_postgresql(
    database_url: str,
) -> None:
    database = Database(database_url)
    try:
        await database.warm()
        pool = database.engine.pool
        if database.is_sqlite:  # a file opened on the loop's thread: nothing to open ahead
            assert pool.checkedin() == 0  # type: ignore[attr-defined]
        else:
            # The pooled ones, given back and kept; the held one is checked out for good.
            assert pool.checkedin() >= WARM_CONNECTIONS  # type: ignore[attr-defined]
            assert pool.checkedout() == 1  # type: ignore[attr-defined]
            async with database.write_driver() as driver:  # the held one, already open
                assert await driver.fetchval("SELECT 1") == 1
    finally:
        await database.dispose()


@pytest.mark.postgresql_only
@pytest.mark.parametrize("warm", [True, False])
async def test_the_served_app_warms_its_database_before_serving(config: Config, warm: bool) -> None:
    app = create_app(config, warm_database=warm)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        pool = app.state.db.engine.pool
        assert (pool.checkedin() >= WARM_CONNECTIONS) is warm
