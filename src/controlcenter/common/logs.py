"""Structured logging (structlog over the standard library)."""

from __future__ import annotations

import logging

import structlog


def configure_logging(level: str = "INFO", fmt: str = "console") -> None:
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        # Not cached: structlog.testing.capture_logs must see the loggers made before it.
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=level.upper(), format="%(levelname)s %(name)s: %(message)s")
    # httpx logs every request URL at INFO; URLs carry no secrets here, but keep it quiet.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name)
    return logger
