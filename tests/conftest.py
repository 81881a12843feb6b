"""Shared fixtures: one real server on 127.0.0.1 per test session, a clean database per test.

The database is SQLite by default and PostgreSQL when TEST_DATABASE_URL is set (`make test`
runs the suite once on each). Under pytest-xdist each worker is a session of its own: its own
fakes, server and database (a SQLite file in its own temporary directory, a PostgreSQL
database of its own on the server).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from cryptography.fernet import Fernet
from fastapi import FastAPI
from sqlalchemy.orm import Session

from controlcenter.admin_settings.store import SettingsStore
from controlcenter.app import create_app, worker_handlers
from controlcenter.auth import passwords
from controlcenter.auth.models import UserRecord
from controlcenter.auth.service import RequestAuth, create_user, start_session
from controlcenter.chat.service import ChatParts
from controlcenter.config import Config
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database
from controlcenter.db.changes import ChangeStamp
from controlcenter.db.migrate import upgrade
from controlcenter.outbox.worker import Handler
from controlcenter.tables import Base
from controlcenter.tools.router import ToolRouter
from tests.answer_watch import AnswerWatch
from tests.dbtools import create_api_token, worker_database, writing
from tests.fakes.server import listening_socket

TEST_SECRET_KEY = "test-secret-key-" + "x" * 48

pytest_plugins = [
    "tests.plugins.llm",
    "tests.plugins.crm",
    "tests.plugins.mcp",
    "tests.plugins.answers",
]

# Still Argon2id, at a cost that lets the suite create hundreds of users in seconds; the
# production parameters are exercised by the CLI tests, which run the real entry point.
passwords.configure(time_cost=1, memory_cost=1024, parallelism=1)


def pytest_report_header() -> str:
    return f"database: {_database_kind()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On PostgreSQL, only the tests that reach the database (docs/testing.md).

    A test reaches it through the `database_url` fixture (the server, `config` and every
    database fixture build on it), or says so with `@pytest.mark.database`. The others (the
    fakes' strictness, the providers, the CRM tools, the layout and reference checks, the CLI
    on its own SQLite file) run the same code on either database, so the SQLite pass has
    already run them; they are deselected here, and pytest reports how many. The SQLite pass
    deselects the tests marked `postgresql_only` the same way.
    """
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        if _database_kind() != "postgresql":
            # What only a server can do (close a connection under the service) has no SQLite case.
            (drop if item.get_closest_marker("postgresql_only") else keep).append(item)
            continue
        uses = "database_url" in getattr(item, "fixturenames", ())
        (keep if uses or item.get_closest_marker("database") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _database_kind() -> str:
    return "postgresql" if os.environ.get("TEST_DATABASE_URL") else "sqlite"


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        url = asyncio.run(worker_database(url, os.environ.get("PYTEST_XDIST_WORKER", "")))
    else:
        url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('db') / 'test.db'}"
    upgrade(url)
    return url


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """A `Database` of the test's own on the suite's database: what another process holds."""
    database = Database(database_url)
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture(scope="session")
def config_overrides(
    llm_config: dict[str, Any], crm_config: dict[str, Any], mcp_config: dict[str, Any]
) -> dict[str, Any]:
    """Settings that point the service at the loopback fakes (one plugin per domain)."""
    return {**llm_config, **crm_config, **mcp_config}


@pytest.fixture(scope="session")
def config(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, config_overrides: dict[str, Any]
) -> Config:
    values: dict[str, Any] = {
        "database_url": database_url,
        "secret_key": TEST_SECRET_KEY,
        "settings_encryption_key": Fernet.generate_key().decode(),
        "var_dir": tmp_path_factory.mktemp("var"),
        "provider_timeout_s": 10.0,
        "outbox_poll_interval_s": 0.05,
    }
    values.update(config_overrides)
    return Config(**values)


@dataclass
class RunningServer:
    app: FastAPI
    url: str

    """The parts the app made in its lifespan, as its routes' dependencies read them."""

    @property
    def config(self) -> Config:
        config: Config = self.app.state.config
        return config

    @property
    def db(self) -> Database:
        db: Database = self.app.state.db
        return db

    @property
    def settings(self) -> SettingsStore:
        settings: SettingsStore = self.app.state.settings
        return settings

    @property
    def chat(self) -> ChatParts:
        chat: ChatParts = self.app.state.chat
        return chat

    @property
    def crm(self) -> CrmTransport:
        return self.chat.crm

    @property
    def tools(self) -> ToolRouter:
        return self.chat.tools

    @property
    def auth(self) -> RequestAuth:
        auth: RequestAuth = self.app.state.auth
        return auth

    def worker_handlers(self) -> dict[str, Handler]:
        """The outbox's handlers over this server's parts, as its lifespan's worker has them."""
        return worker_handlers(self.config, self.db, self.settings, self.crm)


@pytest.fixture(scope="session")
async def server(config: Config, answer_watch: AnswerWatch) -> AsyncIterator[RunningServer]:
    app = create_app(config)
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    watched = answer_watch.wrap(app)  # no driver text in any answer (tests/plugins/answers.py)
    uv_server = uvicorn.Server(
        uvicorn.Config(watched, log_level="warning", access_log=False, lifespan="on")
    )
    task = asyncio.create_task(uv_server.serve(sockets=[sock]))
    while not uv_server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    yield RunningServer(app=app, url=f"http://127.0.0.1:{port}")
    uv_server.should_exit = True
    await task


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        yield http


@pytest.fixture(autouse=True)
async def _clean_database(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Every test starts from empty tables (only when it uses the server)."""
    yield
    if "server" not in request.fixturenames:
        return
    server: RunningServer = request.getfixturevalue("server")
    async with writing(server.db) as db:
        for table in reversed(Base.metadata.sorted_tables):
            # The change stamps stay: they are the processes' own record of what they know,
            # and emptying them would read, at the next poll, as a change of every topic,
            # which makes the next test's caches forget what they had just kept.
            if table.name != ChangeStamp.__tablename__:
                await db.execute(table.delete())
    server.db.changes.forget_all()  # nothing the last test's requests kept counts any more


@dataclass
class AppUser:
    id: str
    email: str
    password: str
    role: str
    token: str
    api_token: str
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


class UserFactory:
    def __init__(self, server: RunningServer) -> None:
        self._server = server
        self._count = 0

    async def create(self, role: str = "user", *, email: str | None = None) -> AppUser:
        self._count += 1
        email = email or f"{role}{self._count}-{os.urandom(3).hex()}@example.com"
        password = f"pw-{os.urandom(8).hex()}"
        config = self._server.config
        password_hash = await passwords.hash_password_off_loop(password)
        user, token, api_token = await self._server.db.run_write(
            _new_user, email, password_hash, role, key=config.jwt_key, ttl_s=config.session_ttl_s
        )
        return AppUser(
            id=user.id,
            email=user.email,
            password=password,
            role=role,
            token=token,
            api_token=api_token,
            name=user.name,
        )


def _new_user(
    session: Session, email: str, password_hash: str, role: str, *, key: str, ttl_s: int
) -> tuple[UserRecord, str, str]:
    """A user with a session and an API token: the user, the session's JWT, the token."""
    user = create_user(
        session, email=email, password_hash=password_hash, name=f"{role} user", role=role
    )
    token = start_session(session, user, key=key, ttl_s=ttl_s)
    return user, token, create_api_token(session, user, "tests")


@pytest.fixture
def users(server: RunningServer) -> UserFactory:
    return UserFactory(server)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture
def anyio_backend() -> Iterator[str]:
    yield "asyncio"
