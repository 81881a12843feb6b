"""One log stream: structlog and the standard library's loggers (uvicorn, Alembic, httpx, the
SDKs) rendered by the same processors, to stderr, as console lines or one JSON object a line.

Every record made while a request is served carries its `request_id` (bound by
`request_id.RequestIdMiddleware` in a context variable, which asyncio copies into the tasks a
request starts, so the chat's background work carries it too). Secrets that look like
credentials are masked in every record, whoever wrote it.

Each request is logged once, by the service (`web/middleware/metrics.py`, the `request` line
with its duration): uvicorn's access log is off, as its own `access_log=False` leaves it.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from structlog.types import EventDict, Processor, WrappedLogger

from controlcenter.common.secrets import redact

_ACCESS_LOGGER = "uvicorn.access"
_HANDLER_NAME = "controlcenter"
# The fields of the service's `request` line, which the standard library hands over as the
# record's `extra` attributes.
REQUEST_FIELDS = ("client", "method", "path", "http", "route", "status", "duration_ms")


def _redact_values(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = redact(value)
    return event


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record is emitted (a test's capture, a
    redirected stream), not to the one there was when logging was configured."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


def _shared() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def configure_logging(level: str = "INFO", fmt: str = "console") -> None:
    """Send every record, ours and the libraries', through one formatter on stderr."""
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[
            *_shared(),
            structlog.processors.format_exc_info,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # Not cached: structlog.testing.capture_logs must see the loggers made before it.
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_shared(), structlog.stdlib.ExtraAdder(allow=REQUEST_FIELDS)],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            # Plain tracebacks: structlog's rich ones print local variables (request data).
            structlog.processors.format_exc_info,
            _redact_values,
            renderer,
        ],
    )
    handler = _StderrHandler()
    handler.setFormatter(formatter)
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in list(root.handlers):
        # Only our own earlier one: handlers of a host (pytest's capture) stay.
        if old.get_name() == _HANDLER_NAME:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    # Libraries that install handlers of their own log through the root's one instead.
    for name in ("uvicorn", "uvicorn.error", "alembic"):
        library = logging.getLogger(name)
        library.handlers.clear()
        library.propagate = True
        library.setLevel(logging.NOTSET)
    # The service writes each request's line itself: uvicorn's access log is left as its
    # `access_log=False` leaves it (no handler, not propagated), under any server, so that
    # uvicorn does not even build the line.
    access = logging.getLogger(_ACCESS_LOGGER)
    access.handlers.clear()
    access.propagate = False
    # httpx (and httpx2, the MCP client's) and the SDKs log every request, with its address, at
    # INFO: kept for DEBUG only.
    for name in ("httpx", "httpcore", "httpx2", "httpcore2", "anthropic", "openai", "mcp"):
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
    # The MCP client's OAuth flow logs every failed attempt with its traceback; the MCP source
    # logs a server that fails once while it fails, naming the authorization server's refusal.
    logging.getLogger("mcp.client.auth").setLevel(logging.CRITICAL)
    # aiosqlite logs every exception its thread hands back, at DEBUG, with the driver's text;
    # the service logs the failures that matter itself.
    logging.getLogger("aiosqlite").setLevel(logging.WARNING)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger named `name` (stdlib-compatible methods, key-value fields)."""
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name)
    return logger
