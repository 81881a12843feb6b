"""Fixtures for the AI provider fakes: one FakeAnthropic and one FakeOpenAI per test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.llm import FakeAnthropic, FakeOpenAI

ANTHROPIC_TEST_KEY = "sk-ant-api03-test-" + "a" * 40
OPENAI_TEST_KEY = "sk-proj-test-" + "b" * 40


@pytest.fixture(scope="session")
def fake_anthropic() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic(ANTHROPIC_TEST_KEY)
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture(scope="session")
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(OPENAI_TEST_KEY)
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture(autouse=True)
def _reset_llm_fakes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test starts with empty scripts and records (only for fakes already started)."""
    yield
    for name in ("fake_anthropic", "fake_openai"):
        if name in request.fixturenames:
            request.getfixturevalue(name).reset()


@pytest.fixture(scope="session")
def llm_config(fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI) -> dict[str, Any]:
    """Config values that point the service at this domain's fakes."""
    return {
        "provider_a_base_url": fake_anthropic.url,
        "provider_b_base_url": fake_openai.url,
        "provider_max_retries": 0,
    }
