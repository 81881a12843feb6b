"""Fixtures for the llm fakes (filled by the llm work)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def llm_config() -> dict[str, Any]:
    """Config values that point the service at this domain's fakes."""
    return {}
