"""OpenTelemetry traces (docs/deploy.md), on only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

Spans: each request (FastAPI's instrumentation), each chat turn, provider call and tool call
(`span()` below, opened by the domains' wrappers), and each outgoing HTTP request (the httpx
instrumentations: CRM, providers, MCP). A chat's run is a task started inside its request,
so it inherits the request's context: one trace per chat.

Secrets: no attribute carries a header (the instrumentations capture none unless told to);
outgoing URLs are recorded without their query and user info (a stored MCP address may hold
credentials), and our own spans carry names, ids and statuses only.

Disabled, `span()` hands out one shared no-op context manager: a chat step pays one global
read and an empty `with` per span.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

import httpx
import httpx2
from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.instrumentation.httpx import (
    HTTPX2ClientInstrumentor,
    HTTPXClientInstrumentor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace import Span, Status, StatusCode, Tracer

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
SERVICE_NAME = "controlcenter"
_URL_ATTRIBUTES = ("url.full", "http.url")

_tracer: Tracer | None = None
_provider: TracerProvider | None = None
_NOOP = contextlib.nullcontext()
Client = TypeVar("Client", httpx.AsyncClient, httpx2.AsyncClient)


def enabled() -> bool:
    return _tracer is not None


def install(app: FastAPI, exporter: SpanExporter | None = None) -> bool:
    """Trace this app when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the OTLP/HTTP exporter reads
    it and its companions itself), or into `exporter` (tests: an in-memory one, exported at
    once). Nothing happens otherwise. True when tracing is on."""
    global _tracer, _provider
    if exporter is None:
        if not os.environ.get(ENDPOINT_ENV):
            return False
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor: Any = BatchSpanProcessor(OTLPSpanExporter())
    else:
        processor = SimpleSpanProcessor(exporter)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    provider.add_span_processor(processor)
    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=provider, exclude_spans=["receive", "send"]
    )
    for instrumentor in (HTTPXClientInstrumentor(), HTTPX2ClientInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(
                tracer_provider=provider,
                request_hook=_outgoing,
                async_request_hook=_outgoing_async,
            )
    _provider = provider
    _tracer = provider.get_tracer(SERVICE_NAME)
    return True


def shutdown() -> None:
    """Flush what is buffered and stop tracing (at the app's end)."""
    global _tracer, _provider
    if _provider is None:
        return
    for instrumentor in (HTTPXClientInstrumentor(), HTTPX2ClientInstrumentor()):
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
    _provider.shutdown()
    _tracer = None
    _provider = None


def traced(client: Client) -> Client:
    """`client` (httpx's or httpx2's) with its requests traced as every httpx client's are, when
    tracing is on. For a client over a transport of its own (the aiohttp transport of the
    provider SDKs and the CRM pool), which the instrumentation's patch of httpx's transport
    does not reach: its documented `instrument_client` wraps the client's own transport
    instead."""
    if _provider is not None:
        if isinstance(client, httpx.AsyncClient):
            HTTPXClientInstrumentor.instrument_client(
                client, tracer_provider=_provider, request_hook=_outgoing_async
            )
        else:  # Typed for httpx's client only; the httpx2 instrumentor takes httpx2's.
            HTTPX2ClientInstrumentor.instrument_client(
                cast(Any, client), tracer_provider=_provider, request_hook=_outgoing_async
            )
    return client


def span(name: str, **attributes: str | int | bool) -> contextlib.AbstractContextManager[Any]:
    """A child span of the current one, made current; a no-op when tracing is off."""
    tracer = _tracer
    if tracer is None:
        return _NOOP
    return _recording(tracer, name, attributes)


@contextlib.contextmanager
def _recording(tracer: Tracer, name: str, attributes: dict[str, Any]) -> Iterator[Span]:
    with tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current


def fail(current: Any, description: str) -> None:
    """Mark the span of `span()` failed (nothing when tracing is off)."""
    if isinstance(current, Span):
        current.set_status(Status(StatusCode.ERROR, description))


def _without_secrets(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _outgoing(current: Span, request: Any) -> None:
    raw = request.url
    if isinstance(raw, tuple):  # (scheme, host, port, target) from the transport level
        scheme, host, port, target = raw
        raw = f"{scheme.decode()}://{host.decode()}{f':{port}' if port else ''}{target.decode()}"
    url = _without_secrets(str(raw))
    for attribute in _URL_ATTRIBUTES:
        current.set_attribute(attribute, url)


async def _outgoing_async(current: Span, request: Any) -> None:
    _outgoing(current, request)
