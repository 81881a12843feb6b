"""Provider fallback after the SDK's own retries, over HTTP end to end.

The shared test server runs with `provider_max_retries=0` (tests/plugins/llm.py), so that an
error reaches the chat at once. Here a second instance of the service, on the same database
and fakes, keeps the SDKs' default of 2 retries, as a deployment does (`PROVIDER_MAX_RETRIES`):
the real anthropic and openai SDKs retry the fakes' errors with their own backoff, and only
what is left after the last retry moves the step to the other provider.

The fakes send no `retry-after` header with these errors: Anthropic documents it for 429
(rate limits), and its 529 and OpenAI's 5xx carry one only sometimes, so the SDKs' default
backoff is what a deployment meets (about 0.4-0.5 s, then 0.75-1 s; a second or two per test,
hence few tests here).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn

from controlcenter.app import create_app
from controlcenter.config import Config
from tests.chat.helpers import stream_chat, types
from tests.chat.test_fallback import set_fallback
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.fakes.llm import ErrorReply, FakeAnthropic, FakeOpenAI, Reply
from tests.fakes.server import listening_socket

RETRIES = 2  # the SDKs' default, and the configuration's (`Config.provider_max_retries`)
ATTEMPTS = [str(n) for n in range(RETRIES + 1)]  # each attempt's `x-stainless-retry-count`
# The real APIs' bodies: Anthropic's 529 (`overloaded_error` is the fake's type for 529),
# OpenAI's 500 and 503 (`server_error`).
OVERLOADED = ErrorReply(529, "Overloaded")
SERVER_ERROR = ErrorReply(
    500, "The server had an error while processing your request. Sorry about that!"
)
UNAVAILABLE = ErrorReply(503, "The engine is currently overloaded, please try again later.")


@pytest.fixture(scope="module")
async def retrying(config: Config, server: RunningServer) -> AsyncIterator[RunningServer]:
    """Another instance of the service with the SDKs' retries on, sharing the database (and
    so the users, the settings and the cleaning between tests) with the shared server."""
    assert config.provider_max_retries == 0  # else the shared server's tests would be slow
    app = create_app(config.model_copy(update={"provider_max_retries": RETRIES}))
    sock = listening_socket("127.0.0.1", 0)
    instance = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    )
    task = asyncio.create_task(instance.serve(sockets=[sock]))
    while not instance.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    yield RunningServer(app=app, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    instance.should_exit = True
    await task


@pytest.fixture
async def retrying_client(retrying: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=retrying.url, timeout=30) as http:
        yield http


@pytest.fixture
async def broker(client: httpx.AsyncClient, users: UserFactory, both_keys: AppUser) -> AppUser:
    """A user, both providers' keys set, and the policy's fallback on."""
    await set_fallback(client, users, on=True)
    return both_keys


async def test_provider_b_finishes_after_provider_a_529s_through_every_retry(
    retrying_client: httpx.AsyncClient,
    broker: AppUser,
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
) -> None:
    fake_anthropic.script(*[OVERLOADED] * (RETRIES + 1))
    fake_openai.script(Reply(text="Answered by provider_b."))
    _, events = await stream_chat(
        retrying_client, broker, {"message": "hi", "provider": "provider_a"}
    )
    assert types(events) == [
        "message_start",
        "provider_fallback",
        "content_delta",
        "message_complete",
    ]
    assert events[1] == {"type": "provider_fallback", "from": "provider_a", "to": "provider_b"}
    assert events[-1]["message"]["content"] == "Answered by provider_b."
    # The SDK's own attempts: the first and each retry, then no more of provider_a.
    assert fake_anthropic.retry_counts == ATTEMPTS
    assert fake_openai.retry_counts == ["0"]
    assert fake_anthropic.invalid == [] and fake_openai.invalid == []


@pytest.mark.parametrize("error", [SERVER_ERROR, UNAVAILABLE], ids=["500", "503"])
async def test_provider_a_finishes_after_provider_b_fails_through_every_retry(
    retrying_client: httpx.AsyncClient,
    broker: AppUser,
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
    error: ErrorReply,
) -> None:
    fake_openai.script(*[error] * (RETRIES + 1))
    fake_anthropic.script(Reply(text="Answered by provider_a."))
    _, events = await stream_chat(
        retrying_client, broker, {"message": "hi", "provider": "provider_b"}
    )
    assert types(events) == [
        "message_start",
        "provider_fallback",
        "content_delta",
        "message_complete",
    ]
    assert events[1] == {"type": "provider_fallback", "from": "provider_b", "to": "provider_a"}
    assert events[-1]["message"]["content"] == "Answered by provider_a."
    assert fake_openai.retry_counts == ATTEMPTS
    assert fake_anthropic.retry_counts == ["0"]
    assert fake_anthropic.invalid == [] and fake_openai.invalid == []


async def test_a_retry_that_succeeds_needs_no_fallback(
    retrying_client: httpx.AsyncClient,
    broker: AppUser,
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
) -> None:
    fake_anthropic.script(OVERLOADED, Reply(text="Answered by provider_a on its retry."))
    _, events = await stream_chat(
        retrying_client, broker, {"message": "hi", "provider": "provider_a"}
    )
    assert types(events) == ["message_start", "content_delta", "message_complete"]
    assert events[-1]["message"]["content"] == "Answered by provider_a on its retry."
    assert events[-1]["message"]["usage"]["providerCalls"] == 1  # one call, whatever its tries
    assert fake_anthropic.retry_counts == ["0", "1"]
    assert fake_openai.requests == []
    assert fake_anthropic.invalid == []
