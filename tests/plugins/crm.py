"""Fixtures for the CRM fake: one server per test session, emptied before every test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.crm import FakeCrm


@pytest.fixture(scope="session")
def fake_crm() -> Iterator[FakeCrm]:
    fake = FakeCrm().start()
    yield fake
    fake.stop()


@pytest.fixture(autouse=True)
def _reset_fake_crm(request: pytest.FixtureRequest) -> None:
    """Every test that uses the fake (directly or through the server) starts from empty."""
    if "fake_crm" in request.fixturenames or "server" in request.fixturenames:
        fake: FakeCrm = request.getfixturevalue("fake_crm")
        fake.reset()


@pytest.fixture(scope="session")
def crm_config(fake_crm: FakeCrm) -> dict[str, Any]:
    """Point the service at the fake, with retries short enough for tests."""
    return {
        "crm_base_url": fake_crm.url,
        "crm_timeout_s": 2.0,
        "crm_max_retries": 2,
        "crm_backoff_base_s": 0.01,
        "crm_max_wait_s": 1.0,
    }
