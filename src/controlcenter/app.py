"""create_app(): routers, middleware, error handlers and the lifespan."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from opentelemetry.sdk.trace.export import SpanExporter
from starlette.exceptions import HTTPException as StarletteHTTPException

from controlcenter.accounts.own_router import router as own_account_router
from controlcenter.accounts.users_router import router as users_router
from controlcenter.activity.ledger import Ledger
from controlcenter.activity.router import router as activity_router
from controlcenter.activity.service import Undo
from controlcenter.admin_settings.router import router as settings_router
from controlcenter.admin_settings.store import SETTINGS, SettingsStore
from controlcenter.auth.refusals import too_many_attempts
from controlcenter.auth.router import router as auth_router
from controlcenter.auth.service import RequestAuth
from controlcenter.auth.throttle import TooManyAttemptsError
from controlcenter.chat.admin_router import router as chat_admin_router
from controlcenter.chat.liveness import Liveness
from controlcenter.chat.router import router as chat_router
from controlcenter.chat.run.runs import ChatRuns
from controlcenter.chat.service import ChatParts
from controlcenter.chat.ui_router import router as ui_chat_router
from controlcenter.common import collector
from controlcenter.common.async_library import declared_asyncio
from controlcenter.common.logs import configure_logging, get_logger
from controlcenter.config import Config
from controlcenter.crm.rate_limit import LocationRateLimiter, RateLimit
from controlcenter.crm.tools import crm_tools
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database
from controlcenter.integrations.router import router as integrations_router
from controlcenter.observability import tracing
from controlcenter.ocs.index import DashboardIndex
from controlcenter.ocs.router import declare_schemes
from controlcenter.ocs.router import router as ocs_router
from controlcenter.onboarding.crm_sync import CrmSync
from controlcenter.onboarding.router import router as onboarding_router
from controlcenter.onboarding.service import OnboardingSaves
from controlcenter.outbox.observed import observed_handlers
from controlcenter.outbox.runtime import start_worker
from controlcenter.outbox.worker import Handler
from controlcenter.pages import mount_pages
from controlcenter.providers.observed import observed
from controlcenter.providers.registry import build_providers, close_providers
from controlcenter.tools.mcp.api import router as mcp_servers_router
from controlcenter.tools.mcp.source import MCP_SERVER_URL_SETTING, McpSource
from controlcenter.tools.mcp.store import McpServerStore
from controlcenter.tools.observed import ObservedSource
from controlcenter.tools.router import StaticSource, ToolRouter
from controlcenter.web import api_docs, health, metrics, openapi_doc
from controlcenter.web.allow import AllowedMethods
from controlcenter.web.errors import ApiError
from controlcenter.web.middleware.body_limit import BodyLimitMiddleware
from controlcenter.web.middleware.cross_origin import CrossOriginProtection
from controlcenter.web.middleware.metrics import RequestMetrics
from controlcenter.web.middleware.redirects import RelativeRedirects
from controlcenter.web.middleware.request_id import HEADER as REQUEST_ID_HEADER
from controlcenter.web.middleware.request_id import STATE_KEY, RequestIdMiddleware

log = get_logger(__name__)

CHAT_DRAIN_S = 30.0


def open_database(config: Config) -> Database:
    """The database every part of one process shares."""
    return Database(config.database_url)


def build_chat_parts(
    config: Config, db: Database, settings: SettingsStore, mcp: McpSource
) -> ChatParts:
    """What chats use: the shared CRM pool, the providers, the tools (the CRM catalogue and
    `mcp`, the MCP servers' tools of `build_mcp`), the runs being written."""
    liveness = Liveness(db, config.chat_liveness_interval_s)
    return ChatParts(
        db=db,
        settings=settings,
        crm=CrmTransport.from_config(config),
        providers=observed(build_providers(config)),
        tools=build_tool_router(mcp, Ledger(db)),
        runs=ChatRuns(db, owner=liveness.owner),
        approval_timeout_s=config.chat_approval_timeout_s,
        liveness=liveness,
    )


async def close_chat_parts(chat: ChatParts) -> None:
    # Replies being written when the server stops are still saved (bounded wait).
    await chat.runs.drain(CHAT_DRAIN_S)
    await close_providers(dict(chat.providers))
    await chat.crm.aclose()
    await chat.tools.aclose()


def build_mcp(config: Config, db: Database, settings: SettingsStore) -> McpSource:
    """The MCP servers' tools: the setting `mcpServerUrl`'s server and the stored ones, whose
    credentials the settings' cipher keeps."""

    async def mcp_server_url() -> str | None:
        return await settings.get(MCP_SERVER_URL_SETTING)

    stored = McpServerStore(db, settings.cipher, ttl_s=config.mcp_cache_ttl_s)
    return McpSource(
        mcp_server_url,
        ttl_s=config.mcp_cache_ttl_s,
        timeout_s=config.mcp_timeout_s,
        stored=stored,
    )


def build_tool_router(mcp: McpSource, ledger: Ledger | None = None) -> ToolRouter:
    """The built-in CRM catalogue first, so that it wins any name clash with an MCP server;
    every call to a tool that writes entered in `ledger`."""
    return ToolRouter(
        [ObservedSource("crm", StaticSource(crm_tools())), ObservedSource("mcp", mcp)],
        recorder=ledger,
    )


# What the outbox's deliveries read that an administrator changes: a change makes the jobs
# waiting for it (or failing for want of it) due at once.
WORKER_WAKES = (SETTINGS,)


def worker_handlers(
    config: Config, db: Database, settings: SettingsStore, crm: CrmTransport
) -> dict[str, Handler]:
    """The outbox's handler of every job kind."""
    limit = RateLimit(
        config.crm_rate_limit_requests, config.crm_rate_limit_window_s, config.crm_rate_limit_share
    )
    limiter = LocationRateLimiter(db, limit, max_wait_s=config.outbox_rate_wait_s)
    sync = CrmSync(db, settings, crm, limiter)
    return observed_handlers(sync.handlers())


def create_app(
    config: Config | None = None,
    *,
    run_worker: bool = False,
    span_exporter: SpanExporter | None = None,
) -> FastAPI:
    """`span_exporter`: trace into it (tests); else traces go where OTEL_EXPORTER_OTLP_ENDPOINT
    says, when it is set."""
    config = config or Config()
    # Before anything can log: structlog's defaults render tracebacks with local variables,
    # which would put request data (passwords, keys) into the log, and slowly.
    configure_logging(config.log_level, config.log_format)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Each part is made once, here, and kept on `app.state` under its own name, where the
        # route dependencies of its domain read it (`web/deps.py`, `auth/deps.py`, ...).
        db = open_database(config)
        await db.changes.start()  # from here on, what is read may be kept in memory
        settings = SettingsStore(db, config.fernet_key)
        mcp = build_mcp(config, db, settings)
        chat = build_chat_parts(config, db, settings, mcp)
        app.state.db = db
        app.state.settings = settings
        app.state.mcp = mcp
        app.state.auth = RequestAuth(db, config.jwt_key)
        app.state.index = DashboardIndex.from_config(db, config)
        app.state.chat = chat
        app.state.onboarding = OnboardingSaves(db)
        app.state.activity = Undo(db, settings, chat.crm)
        # Each server process runs one worker; lease-based claiming keeps several safe.
        worker = (
            start_worker(
                db, config, worker_handlers(config, db, settings, chat.crm), wake_on=WORKER_WAKES
            )
            if run_worker
            else None
        )
        running = chat.liveness
        liveness = asyncio.create_task(running.run()) if running is not None else None
        collector.settle()  # last: start-up's objects are the server's for its whole life
        try:
            with declared_asyncio():
                yield
        finally:
            if worker is not None:
                await worker.stop()
            if liveness is not None:
                # Answers still running are closed by another process, or the next one.
                liveness.cancel()
                await asyncio.gather(liveness, return_exceptions=True)
            await close_chat_parts(chat)
            await db.dispose()
            if traced:
                tracing.shutdown()

    app = FastAPI(
        title="Control Center",
        version="0.0.1",
        lifespan=lifespan,
        # The service traces through its own instrumentation and provider
        # (`observability.tracing`). FastAPI's native telemetry would act only under a global
        # OpenTelemetry provider, yet looks for one (reading `os.environ`) on every request
        # it routes.
        telemetry={"tracing": False, "metrics": False, "logs": False},
        docs_url=None,  # served by api_docs, with local assets
        openapi_url="/openapi.json",
        redoc_url=None,
        generate_unique_id_function=openapi_doc.operation_id,
        # Validation mode for every model: an event's `data` is the JSON string it is on the wire.
        separate_input_output_schemas=False,
        description="Dashboard API index, CRM chat assistant, onboarding, settings and "
        "accounts. Errors are `{error, details?}`; every answer carries `X-Request-ID`.",
    )
    app.add_middleware(BodyLimitMiddleware, limit=config.max_body_bytes)
    app.add_middleware(RelativeRedirects)
    app.add_middleware(CrossOriginProtection, allowed=config.trusted_origins)
    # Times, counts and logs the request: inside the request id's context, for its log line.
    app.add_middleware(RequestMetrics)
    app.add_middleware(RequestIdMiddleware)  # outermost: every answer and log record has one
    _install_error_handlers(app)
    for router in (
        # First: the router tries each route in turn, and the index is the route called most.
        ocs_router,
        health.router,
        auth_router,
        chat_router,
        chat_admin_router,
        ui_chat_router,
        activity_router,
        onboarding_router,
        settings_router,
        mcp_servers_router,
        integrations_router,
        users_router,
        own_account_router,
        metrics.router,
    ):
        app.include_router(router)
    declare_schemes(app)
    mount_pages(app)
    traced = tracing.install(app, span_exporter)
    api_docs.install(app)
    app.state.config = config
    return app


def _install_error_handlers(app: FastAPI) -> None:
    allowed = AllowedMethods(app)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(TooManyAttemptsError)
    async def throttled(request: Request, exc: TooManyAttemptsError) -> JSONResponse:
        return too_many_attempts(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        messages = {404: "Not found", 405: "Method not allowed"}
        message = messages.get(exc.status_code, str(exc.detail))
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = allowed.header(request.url.path) or headers.get("Allow", "")
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [
            {"path": list(error["loc"]), "message": error["msg"], "type": error["type"]}
            for error in exc.errors()
        ]
        return JSONResponse({"error": "Validation failed", "details": details}, status_code=400)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette answers this from outside every middleware, once the request's own
        # context is gone: its request id comes from the request's state.
        rid = getattr(request.state, STATE_KEY, None)
        # Logged with its traceback for operators; the client never sees internals.
        log.exception(
            "unhandled error", path=request.url.path, method=request.method, request_id=rid
        )
        headers = {REQUEST_ID_HEADER: rid} if rid is not None else None
        return JSONResponse({"error": "Internal server error"}, status_code=500, headers=headers)
