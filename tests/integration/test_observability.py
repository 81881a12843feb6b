"""/metrics after a chat and an onboarding, and one chat's trace."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from controlcenter.app import create_app
from controlcenter.config import Config
from controlcenter.outbox.runtime import RunningWorker
from tests.chat.helpers import Llm, stream_chat
from tests.conftest import RunningServer, UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import ErrorReply, FakeAnthropic, Reply, ToolUse
from tests.fakes.server import listening_socket
from tests.integration.conftest import AGENCY_KEY, Agency
from tests.integration.test_onboarding_delivery import all_done, onboard
from tests.metric_samples import delta, scrape
from tests.outbox.conftest import wait_for
from tests.outbox.operator import Operator


def two_crm_calls(contact_id: str) -> list[Reply]:
    return [
        Reply(text="Looking.", tool_uses=[ToolUse("contacts_get-contacts", {"query": "dana"})]),
        Reply(tool_uses=[ToolUse("contacts_get-contact", {"contactId": contact_id})]),
        Reply(text=" Found Dana."),
    ]


async def test_metrics_after_chats_and_an_onboarding(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    agency: Agency,
    operator: Operator,
    worker: RunningWorker,
    fake_crm: FakeCrm,
    fake_anthropic: FakeAnthropic,
) -> None:
    before = await scrape(client)
    location = agency.location()
    dana = fake_crm.add_contact(location, firstName="Dana", email="dana@example.com")
    llm = Llm("provider_a", fake_anthropic, "providerAApiKey")
    broker = await agency.broker(users, llm, location)
    fake_anthropic.script(*two_crm_calls(dana["id"]), ErrorReply(529, "Overloaded"))
    _, completed = await stream_chat(client, broker, {"message": "Who is Dana?"})
    assert completed[-1]["type"] == "message_complete"
    _, failed = await stream_chat(client, broker, {"message": "Again?"})
    assert failed[-1]["type"] == "error"
    conversation = completed[0]["conversationId"]
    await client.get(f"/api/v1/control-center/conversations/{conversation}", headers=broker.headers)
    await onboard(client, broker, "$50k-$99k")
    await wait_for(lambda: all_done(server))

    async def both_turns_counted() -> bool:
        # A turn is counted once its run has ended and its end is stored, which follows the
        # last event the client reads.
        now = await scrape(client)
        return all(
            delta(before, now, "controlcenter_chats_total", state=state) >= 1
            for state in ("completed", "failed")
        )

    await wait_for(both_turns_counted)
    after = await scrape(client)

    def grew(name: str, **labels: str) -> float:
        return delta(before, after, name, **labels)

    assert grew("controlcenter_chats_total", state="started") == 2
    assert grew("controlcenter_chats_total", state="completed") == 1
    assert grew("controlcenter_chats_total", state="failed") == 1
    assert grew("controlcenter_provider_calls_total", provider="provider_a", status="ok") == 3
    assert grew("controlcenter_provider_calls_total", provider="provider_a", status="529") == 1
    assert grew("controlcenter_provider_call_duration_seconds_count", provider="provider_a") == 4
    assert grew("controlcenter_tool_calls_total", source="crm", outcome="ok") == 2
    chat_route = {"route": "/api/v1/control-center/chat", "method": "POST"}
    assert grew("controlcenter_http_requests_total", **chat_route, status="200") == 2
    assert grew("controlcenter_http_request_duration_seconds_count", **chat_route) == 2
    # By template, never by the raw path (one series per conversation otherwise).
    template = "/api/v1/control-center/conversations/{conversation_id}"
    assert grew("controlcenter_http_requests_total", route=template, method="GET", status="200")
    assert not any(conversation in str(key) for key in after)
    onboarding = {"route": "/api/v1/onboarding", "method": "POST", "status": "200"}
    assert grew("controlcenter_http_requests_total", **onboarding) == 1
    delivered = {
        dict(labels)["kind"]: value - before.get((name, labels), 0.0)
        for (name, labels), value in after.items()
        if name == "controlcenter_outbox_jobs_total" and dict(labels)["state"] == "delivered"
    }
    # Only the kinds this onboarding queues (no high-GCI tag at $50k-$99k): a kind that an
    # earlier test of the session delivered has a series here too, with nothing new in it.
    delivered = {kind: count for kind, count in delivered.items() if count}
    assert set(delivered) == {"crm.tag_onboarding_complete", "crm.sync_user"}, delivered
    assert all(count >= 1 for count in delivered.values()), delivered
    for kind in delivered:
        assert grew("controlcenter_outbox_delivery_duration_seconds_count", kind=kind) >= 1


async def test_metrics_token(client: httpx.AsyncClient, server: RunningServer) -> None:
    config = server.config
    config.metrics_token = "metrics-secret-1"
    try:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "metrics-secret-1"},
        ):
            response = await client.get("/metrics", headers=headers)
            assert response.status_code == 401
            assert response.json() == {"error": "Unauthorized"}
            assert response.headers["www-authenticate"] == "Bearer"
        await scrape(client, Authorization="Bearer metrics-secret-1")
    finally:
        config.metrics_token = None


# -- traces -----------------------------------------------------------------------------------


@pytest.fixture
async def traced(
    config: Config, server: RunningServer
) -> AsyncIterator[tuple[str, InMemorySpanExporter]]:
    """A second app on the same database, tracing into memory."""
    exporter = InMemorySpanExporter()
    app = create_app(config, span_exporter=exporter)
    sock = listening_socket("127.0.0.1", 0)
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    task = asyncio.create_task(uv.serve(sockets=[sock]))
    while not uv.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", exporter
    uv.should_exit = True
    await task


def tree(spans: list[ReadableSpan], root: ReadableSpan, depth: int = 0) -> list[str]:
    lines = [f"{'  ' * depth}{root.name}"]
    assert root.context is not None
    for child in sorted(spans, key=lambda s: s.start_time or 0):
        if child.parent is not None and child.parent.span_id == root.context.span_id:
            lines += tree(spans, child, depth + 1)
    return lines


async def test_one_trace_per_chat_without_secrets(
    traced: tuple[str, InMemorySpanExporter],
    server: RunningServer,
    users: UserFactory,
    agency: Agency,
    fake_crm: FakeCrm,
    fake_anthropic: FakeAnthropic,
) -> None:
    url, exporter = traced
    location = agency.location()
    dana = fake_crm.add_contact(location, firstName="Dana", email="dana@example.com")
    llm = Llm("provider_a", fake_anthropic, "providerAApiKey")
    broker = await agency.broker(users, llm, location)
    fake_anthropic.script(*two_crm_calls(dana["id"]))
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        _, events = await stream_chat(http, broker, {"message": "Who is Dana?"})
    assert events[-1]["type"] == "message_complete"
    await wait_for(lambda: _ended(exporter, "chat turn"))

    spans = list(exporter.get_finished_spans())
    [turn] = [s for s in spans if s.name == "chat turn"]
    assert turn.parent is not None and turn.context is not None
    chat = [s for s in spans if s.context and s.context.trace_id == turn.context.trace_id]
    # The test's own httpx client is traced too (and its trace context sent): the server's
    # span is the chat's root here.
    [root] = [s for s in chat if s.kind.name == "SERVER"]
    shape = tree(chat, root)
    print("\n".join(shape))  # the closing note's span tree
    assert shape[0] == "POST /api/v1/control-center/chat"
    assert shape.count("    provider call") == 3
    assert shape.count("    tool call") == 2
    # Each provider call and CRM request has its HTTP client span beneath it.
    providers = [s for s in chat if s.name == "provider call"]
    tools = [s for s in chat if s.name == "tool call"]
    for parent in providers + tools:
        assert parent.context is not None
        children = [s for s in chat if s.parent and s.parent.span_id == parent.context.span_id]
        assert any(s.kind.name == "CLIENT" for s in children), parent.name
    assert {s.attributes["tool.source"] for s in tools if s.attributes} == {"crm"}

    secrets = [fake_anthropic.api_key, AGENCY_KEY, broker.token, broker.password, "Bearer"]
    for span in spans:
        text = json.dumps(dict(span.attributes or {}), default=str)
        for secret in secrets:
            assert secret not in text, (span.name, secret)


async def _ended(exporter: InMemorySpanExporter, name: str) -> bool:
    return any(span.name == name for span in exporter.get_finished_spans())


# A process whose global OpenTelemetry tracer provider records every span, as a host's
# auto-instrumentation would install one; the app is the service's own.
_GLOBAL_PROVIDER = """
import asyncio, os, sys
os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from controlcenter.app import create_app
from controlcenter.db.migrate import upgrade

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
upgrade(os.environ["DATABASE_URL"])
app = create_app()

async def main():
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/api/v1/onboarding")).status_code == 401

asyncio.run(main())
print(sorted({span.name for span in exporter.get_finished_spans()}))
"""


def test_fastapis_native_telemetry_stays_off_under_a_global_provider(
    tmp_path: Path, repo_root: Path
) -> None:
    """The service traces through its own provider. FastAPI's native telemetry,
    which would look for a global provider on every request it routes, is off: a global one
    installed by the host gets none of its spans (FastAPI 0.165 would add a server span and
    its dependency, endpoint and serialization spans to every request)."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'native.db'}",
        "VAR_DIR": str(tmp_path),
        "LOG_LEVEL": "WARNING",
    }
    done = subprocess.run(
        [sys.executable, "-c", _GLOBAL_PROVIDER],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
