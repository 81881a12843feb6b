"""Peers: what one provider call costs through LiteLLM's proxy and through the bare SDK, beside
what the service adds per provider call inside a chat (the chat section of the same run).

One fake provider (the chat section's FakeAnthropic, `bench.fakes llm`, in its own process,
answering at once) and one request: a chat's first call with the built-in CRM catalogue (31
tools, ~24 KB), the system prompt and one user message. Each way makes `CALLS` calls one after
the other from this process, after `WARM_CALLS` unmeasured ones:

- direct: the request's bytes posted with a bare aiohttp session, the baseline of every
  latency here (the fake's own time, the loopback and the least a client can do);
- the bare SDK: `AsyncAnthropic.messages.create` with the SDK's aiohttp transport, as its README
  shows: added CPU is this process's CPU per call over direct's, added latency its latency
  per call over direct's;
- LiteLLM's proxy (`litellm[proxy]`, `LITELLM`, installed from PyPI by `uv tool run` into an
  environment of its own, never the project's; its model cost map is the one it ships,
  `LITELLM_LOCAL_MODEL_COST_MAP`, so it starts offline), one worker, the fake as its Anthropic
  model: the same request posted to its Anthropic endpoint (`/v1/messages`) with a bare aiohttp
  session. Added CPU is the proxy's CPU per call (all it does is add), added latency its
  latency per call over direct's;
- the service: its CPU per step of the chat section's x1 (lone chats, idle less; a step is a
  provider or a tool call, so a provider call's own is below it), and its added latency per
  provider call, (x1's p50 total - ideal) / provider calls: everything the service adds to a
  chat (its tool calls and storage included), charged to its provider calls.

The floor under a unit of work of the service, each way alone in this process (CPU per call,
after `WARM_CALLS`): one write transaction of one insert on the run's database (a table of its
own, dropped after), the same statements each way: through the service's `Database`
(`run_write`: on SQLite a sync `Session` in the writer's thread, on PostgreSQL
`AsyncSession.run_sync`), on SQLite also through SQLAlchemy's `AsyncSession` on aiosqlite (the
way the service does not take, set up as its writes are), and through the driver alone, with
no SQLAlchemy: aiosqlite and sqlite3 on SQLite (`BEGIN IMMEDIATE`, the insert, `COMMIT`, on
one open connection), asyncpg on PostgreSQL (the insert in `Connection.transaction()`). The
drivers' rows are the floor; the service's row is what SQLAlchemy and its thread add above
it. The floor of a chat step (the provider and
tool calls through the SDKs alone) is the chat section's (bench/chat_floor.py): it sends the
requests a lone chat sent, as the service sends them.

The targets: the service's added latency per provider call below LiteLLM's.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import chat
from bench.deploy import Deployment, Options
from bench.fakes import FakeProc, running
from bench.procs import Proc, free_port, per_call, precise_cpu_seconds
from bench.results import Row, ms
from bench.timeline import step

# LiteLLM's proxy, pinned: its `proxy` extra from 1.110 on needs a package PyPI does not have.
LITELLM = "litellm[proxy]==1.108.7"
CALLS = {False: 300, True: 60}  # by --quick
WARM_CALLS = 20
MODEL = "claude-sonnet-5-5"
SYSTEM = "You are the broker's assistant. Answer from the CRM's data, and say when it has none."


@dataclass(frozen=True)
class Way:
    """One way's figures per call: the calling process's CPU, the latency, a proxy's CPU."""

    cpu_s: float
    latency_s: float
    proxy_cpu_s: float = 0.0


def request() -> dict[str, Any]:
    """A chat's first provider call, as `messages.create` takes it."""
    from controlcenter.crm.tools import crm_tools
    from controlcenter.tools.router import Toolbox

    tools = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in Toolbox(crm_tools()).specs
    ]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Find the Smiths"}]}]
    return {
        "max_tokens": 4096,
        "messages": messages,
        "model": MODEL,
        "system": SYSTEM,
        "tools": tools,
    }


def run(deployment: Deployment, options: Options) -> list[Row]:
    calls = CALLS[options.quick]
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        work = Path(tmp)
        llm = FakeProc("llm", work)
        with running(llm):
            url, key = llm.info["url"], llm.info["api_key"]
            body = request()
            direct = asyncio.run(_posted(url + "/v1/messages", key, body, calls))
            sdk = asyncio.run(_sdk(url, key, body, calls))
            units = asyncio.run(_units_of_work(deployment.database_url, calls))
            with _litellm(work, url, key) as proxy:
                through = asyncio.run(
                    _posted(proxy.url + "/v1/messages", proxy.key, body, calls, proxy)
                )
    return [
        *_rows(deployment.db_kind, calls, direct, sdk, through),
        *_floor_rows(deployment.db_kind, calls, units),
    ]


async def _timed(call: Callable[[], Awaitable[None]], calls: int, pid: int | None) -> Way:
    for _ in range(WARM_CALLS):
        await call()
    proxy_before = precise_cpu_seconds(pid) if pid is not None else 0.0
    cpu, latency = await per_call(call, calls)
    proxy = (precise_cpu_seconds(pid) - proxy_before) / calls if pid is not None else 0.0
    return Way(cpu, latency, proxy)


async def _posted(
    url: str, key: str, body: dict[str, Any], calls: int, proxy: _Proxy | None = None
) -> Way:
    """The request's bytes posted with a bare aiohttp session; the answer read whole."""
    import aiohttp

    data = json.dumps(body, separators=(",", ":")).encode()
    headers = {
        "content-type": "application/json",
        "x-api-key": key,
        "authorization": f"Bearer {key}",
        "anthropic-version": "2023-06-01",
    }
    async with aiohttp.ClientSession() as session:

        async def call() -> None:
            async with session.post(url, data=data, headers=headers) as answer:
                answer.raise_for_status()
                await answer.read()

        with step(f"{calls} calls posted to {url}"):
            return await _timed(call, calls, proxy.pid if proxy else None)


async def _sdk(url: str, key: str, body: dict[str, Any], calls: int) -> Way:
    """The official SDK over its aiohttp transport: `messages.create`, as its README shows."""
    import anthropic

    async with anthropic.AsyncAnthropic(
        api_key=key, base_url=url, max_retries=0, http_client=anthropic.DefaultAioHttpClient()
    ) as client:

        async def create() -> None:
            await client.messages.create(**body)

        with step(f"{calls} calls through the bare SDK"):
            return await _timed(create, calls, None)


INSERT = "INSERT INTO bench_unit (n) VALUES (1)"
SERVICE = "the service's Database.run_write"
ASYNC_SESSION = "SQLAlchemy AsyncSession on aiosqlite"
SQLITE3_HOP = "sqlite3 behind one thread hop"
# The drivers' own connections set up as the service's are (`db.engine.configure_sqlite`), so
# that each way commits with the same durability.
PRAGMAS = ("PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON")


async def _units_of_work(url: str, calls: int) -> dict[str, float]:
    """CPU per write transaction of one insert, by way: the service's `Database`, SQLAlchemy's
    `AsyncSession` on aiosqlite (SQLite: the way the service does not take), and the drivers
    alone on the same table."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from controlcenter.db import Database

    def execute(session: Session, sql: str) -> None:
        session.execute(text(sql))

    db = Database(url)
    try:
        await db.run_write(execute, "CREATE TABLE bench_unit (n INTEGER NOT NULL)")

        async def call() -> None:
            await db.run_write(execute, INSERT)

        with step(f"{calls} write transactions, the service's Database"):
            ways = {SERVICE: (await _timed(call, calls, None)).cpu_s}
        if db.is_sqlite:
            ways[ASYNC_SESSION] = await _async_session_unit(url, calls)
            path = url.split(":///", 1)[1]
            ways["aiosqlite alone"] = await _aiosqlite_unit(path, calls)
            ways[SQLITE3_HOP] = await _sqlite3_unit(path, calls, hop=True)
            ways["sqlite3 alone"] = await _sqlite3_unit(path, calls, hop=False)
        else:
            ways["asyncpg alone"] = await _asyncpg_unit(url, calls)
        return ways
    finally:
        await db.run_write(execute, "DROP TABLE IF EXISTS bench_unit")
        await db.dispose()


async def _async_session_unit(url: str, calls: int) -> float:
    """An `AsyncSession` write on an engine set up as the service's SQLite writes are (its
    listeners, one connection)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    from controlcenter.db.engine import configure_sqlite

    engine = create_async_engine(url, pool_size=1, max_overflow=0)
    configure_sqlite(engine.sync_engine, writes=True)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    try:

        async def call() -> None:
            async with sessions() as session, session.begin():
                await session.execute(text(INSERT))

        with step(f"{calls} write transactions, {ASYNC_SESSION}"):
            return (await _timed(call, calls, None)).cpu_s
    finally:
        await engine.dispose()


async def _aiosqlite_unit(path: str, calls: int) -> float:
    import aiosqlite

    async with aiosqlite.connect(path, isolation_level=None) as connection:
        for pragma in PRAGMAS:
            await connection.execute(pragma)

        async def call() -> None:
            await connection.execute("BEGIN IMMEDIATE")
            await connection.execute(INSERT)
            await connection.execute("COMMIT")

        with step(f"{calls} write transactions, aiosqlite alone"):
            return (await _timed(call, calls, None)).cpu_s


async def _sqlite3_unit(path: str, calls: int, *, hop: bool) -> float:
    """sqlite3's transaction on the loop's thread, or (`hop`) on a thread of one, through
    `loop.run_in_executor` as the service's units run: the floor of the service's path."""
    import sqlite3
    from concurrent.futures import ThreadPoolExecutor

    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    thread = ThreadPoolExecutor(1)
    for pragma in PRAGMAS:
        connection.execute(pragma)

    def transaction() -> None:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(INSERT)
        connection.execute("COMMIT")

    async def call() -> None:
        if hop:
            await asyncio.get_running_loop().run_in_executor(thread, transaction)
        else:
            transaction()

    try:
        with step(f"{calls} write transactions, {SQLITE3_HOP if hop else 'sqlite3 alone'}"):
            return (await _timed(call, calls, None)).cpu_s
    finally:
        thread.shutdown()
        connection.close()


async def _asyncpg_unit(url: str, calls: int) -> float:
    import asyncpg  # type: ignore[import-untyped]
    from sqlalchemy.engine import make_url

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(dsn)
    try:

        async def call() -> None:
            async with connection.transaction():
                await connection.execute(INSERT)

        with step(f"{calls} write transactions, asyncpg alone"):
            return (await _timed(call, calls, None)).cpu_s
    finally:
        await connection.close()


def _floor_rows(db: str, calls: int, units_s: dict[str, float]) -> list[Row]:
    """One write transaction's CPU, by way (the service's, and the others beside it)."""
    return [
        Row(
            db,
            f"floor: one write transaction, {way}",
            f"{_us(cpu_s)} CPU",
            baseline=(
                ""
                if way == SERVICE
                else f"the service's {_us(units_s[SERVICE])}, {units_s[SERVICE] / cpu_s:.2f}x this"
            ),
            note=f"{calls} sequential calls each; one insert",
        )
        for way, cpu_s in units_s.items()
    ]


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} us"


@dataclass(frozen=True)
class _Proxy:
    url: str
    pid: int
    key: str  # its master key


@contextmanager
def _litellm(work: Path, url: str, key: str) -> Iterator[_Proxy]:
    """LiteLLM's proxy against the fake, started and answering; stopped after the block."""
    params = {"model": f"anthropic/{MODEL}", "api_base": url, "api_key": key}
    config = {
        "model_list": [{"model_name": MODEL, "litellm_params": params}],
        "litellm_settings": {"telemetry": False},
    }
    path = work / "litellm.json"  # YAML is a superset of JSON
    path.write_text(json.dumps(config))
    port = free_port()
    # `uv run` names itself in `UV`; on PATH, `python3` is then the project's environment's,
    # which has no uv of its own.
    uv = [os.environ["UV"]] if os.environ.get("UV") else ["python3", "-m", "uv"]
    argv = [*uv, "tool", "run", "--from", LITELLM, "litellm"]
    argv += ["--config", str(path), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--num_workers", "1"]
    # It refuses to start without a master key (every request would be let in); it checks the
    # key of each request, as the service checks its session.
    master = "sk-bench-" + secrets.token_hex(16)
    env = {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        "LITELLM_MASTER_KEY": master,
    }
    with Proc("litellm", argv, env) as proc:
        with step("litellm proxy started"):
            proc.wait_http(f"http://127.0.0.1:{port}/health/liveliness", timeout=600)
        yield _Proxy(f"http://127.0.0.1:{port}", proc.pid, master)


def _rows(db: str, calls: int, direct: Way, sdk: Way, proxy: Way) -> list[Row]:
    base = f"direct post: {ms(direct.latency_s)} a call, {ms(direct.cpu_s)} CPU"
    of = f" ({calls} sequential calls, 31-tool request)"
    litellm_added = proxy.latency_s - direct.latency_s
    rows = [
        Row(
            db,
            "peer: bare SDK per provider call",
            f"+{ms(sdk.cpu_s - direct.cpu_s)} CPU, +{ms(sdk.latency_s - direct.latency_s)} "
            f"latency{of}",
            baseline=base,
        ),
        Row(
            db,
            "peer: LiteLLM proxy per provider call",
            f"+{ms(proxy.proxy_cpu_s)} CPU, +{ms(litellm_added)} latency{of}",
            baseline=base,
            note=f"{LITELLM}, one worker, its /v1/messages",
        ),
    ]
    per_chat, total = chat.CPU_PER_CHAT.get((db, 1)), chat.LONE_TOTAL.get(db)
    if per_chat is None or total is None:
        rows.append(
            Row(db, "service per provider call", "n/a", note="the chat section did not run")
        )
        return rows
    cpu_step = per_chat / (chat.PROVIDER_CALLS + chat.TOOL_CALLS)
    added = (total - chat.IDEAL_S) / chat.PROVIDER_CALLS
    rows.append(
        Row(
            db,
            "service per provider call (inside a chat, x1)",
            f"{ms(cpu_step)} CPU per step, +{ms(added)} latency",
            baseline=f"LiteLLM +{ms(litellm_added)} latency",
            target="added latency < LiteLLM's",
            met=added < litellm_added,
        )
    )
    return rows
