"""Fixtures for the mcp fakes (filled by the mcp work)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def mcp_config() -> dict[str, Any]:
    """Config values that point the service at this domain's fakes."""
    return {}
