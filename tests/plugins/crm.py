"""Fixtures for the crm fakes (filled by the crm work)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def crm_config() -> dict[str, Any]:
    """Config values that point the service at this domain's fakes."""
    return {}
