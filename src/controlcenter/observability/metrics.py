"""The service's Prometheus metrics (`GET /metrics`, listed in docs/deploy.md) and their text
exposition.

Several `serve` workers are several processes; each one's counters would show only its own
share. When `PROMETHEUS_MULTIPROC_DIR` is set (`serve --workers N` with N > 1 sets it to a
fresh directory before the workers start, see `cli`), prometheus-client keeps every value in
a file per process there and `/metrics` adds them up, so any worker answers for all of them.
The variable must be set before this module is first imported (prometheus-client picks its
value store at import time); the workers inherit it.
"""

from __future__ import annotations

import os
from functools import cache

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

HTTP_REQUESTS = Counter(
    "controlcenter_http_requests_total",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
)
HTTP_DURATION = Histogram(
    "controlcenter_http_request_duration_seconds",
    "Time from a request's arrival to the end of its answer (a whole stream for the chats).",
    ["route", "method"],
)
CHATS = Counter(
    "controlcenter_chats_total",
    "Chat turns by stage: started, then completed or failed (an error event ended them).",
    ["state"],
)
PROVIDER_CALLS = Counter(
    "controlcenter_provider_calls_total",
    "Calls to an AI provider by provider and status (ok, the API's HTTP status, or error).",
    ["provider", "status"],
)
PROVIDER_DURATION = Histogram(
    "controlcenter_provider_call_duration_seconds",
    "Duration of the calls to an AI provider, retries included.",
    ["provider"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120),
)
TOOL_CALLS = Counter(
    "controlcenter_tool_calls_total",
    "Tool runs by source (crm, mcp) and outcome (ok, error).",
    ["source", "outcome"],
)
OUTBOX_JOBS = Counter(
    "controlcenter_outbox_jobs_total",
    "Outbox deliveries by job kind and the state they left the job in: delivered, waiting "
    "(for settings), failed (retried later, or dead past its maximum age), dead (permanent).",
    ["kind", "state"],
)
OUTBOX_DURATION = Histogram(
    "controlcenter_outbox_delivery_duration_seconds",
    "Duration of one delivery attempt of an outbox job, by kind.",
    ["kind"],
)


class HttpSeries:
    """The HTTP request counter's and duration histogram's children of one route template and
    method, bound once: `labels()` takes a lock, checks the label values and looks the child
    up on every call, which costs as much as recording the values, on every request of the
    busiest routes. The counter's child of each status is bound when that status first occurs,
    so no series appears before its first request."""

    def __init__(self, route: str, method: str) -> None:
        self._route = route
        self._method = method
        self._duration = HTTP_DURATION.labels(route, method)
        self._counts: dict[int, Counter] = {}

    def record(self, status: int, seconds: float) -> None:
        count = self._counts.get(status)
        if count is None:
            count = self._counts[status] = HTTP_REQUESTS.labels(
                self._route, self._method, str(status)
            )
        count.inc()
        self._duration.observe(seconds)


@cache
def http_series(route: str, method: str) -> HttpSeries:
    """One `HttpSeries` per route template and method (a bounded set: templates, never raw
    paths, see `web/middleware/metrics.py`)."""
    return HttpSeries(route, method)


def exposition(accept: str) -> tuple[bytes, str]:
    """Every metric and its content type, in the format the scraper's `Accept` asks for
    (Prometheus text 0.0.4 by default), summed over the workers when several."""
    encode, content_type = choose_encoder(accept)
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return encode(registry), content_type
    return encode(REGISTRY), content_type
