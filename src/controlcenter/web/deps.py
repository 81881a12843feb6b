"""Route dependencies on the app's infrastructure: its configuration and its database.

The app puts both on `app.state` (`config`, `db`) when it is made and when it starts
(`app.py`); each domain's own dependencies (`auth/deps.py`, `chat/deps.py`, ...) read the
parts it builds for that domain the same way.

No `from __future__ import annotations` here: FastAPI reads the `Annotated` dependencies at
run time.
"""

from typing import Annotated

from fastapi import Depends, Request

from controlcenter.config import Config
from controlcenter.db import Database


async def get_config(request: Request) -> Config:
    """The app's configuration. Async, so `Depends` resolves it on the event loop instead of a
    thread-pool hop per request."""
    config: Config = request.app.state.config
    return config


async def get_database(request: Request) -> Database:
    database: Database = request.app.state.db
    return database


ConfigDep = Annotated[Config, Depends(get_config)]
DatabaseDep = Annotated[Database, Depends(get_database)]
