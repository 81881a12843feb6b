"""Each provider built from a Config that points at its loopback fake."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlcenter.config import Config
from controlcenter.providers.anthropic import AnthropicProvider
from controlcenter.providers.base import PROVIDER_A, PROVIDER_B, Provider
from controlcenter.providers.registry import build_providers, close_providers
from tests.fakes.llm import FakeAnthropic, FakeOpenAI

# The providers' timeout in these tests: far above what a fake's answer takes on a loaded
# machine, so that only the test of a timeout meets one (with a timeout of its own).
TIMEOUT_S = 30.0


@pytest.fixture
async def providers(llm_config: dict[str, Any]) -> AsyncIterator[dict[str, Provider]]:
    built = build_providers(Config(**llm_config, provider_timeout_s=TIMEOUT_S))
    yield built
    await close_providers(built)


def fake_of(
    provider: Provider, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> FakeAnthropic | FakeOpenAI:
    """The fake API `provider` talks to."""
    return fake_anthropic if isinstance(provider, AnthropicProvider) else fake_openai


@pytest.fixture(params=[PROVIDER_A, PROVIDER_B])
def case(
    request: pytest.FixtureRequest,
    providers: dict[str, Provider],
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
) -> tuple[Provider, FakeAnthropic | FakeOpenAI]:
    """(provider, its fake), for each of the two providers."""
    provider = providers[request.param]
    return provider, fake_of(provider, fake_anthropic, fake_openai)


@pytest.fixture
def unused_port_url() -> str:
    """An address on 127.0.0.1 where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
