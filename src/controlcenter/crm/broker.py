"""The session user's own CRM client for the assistant's tools (filled by the CRM issue)."""

from __future__ import annotations

from typing import Any

from controlcenter.auth.models import User
from controlcenter.services import Services


async def broker_client(services: Services, user: User) -> Any | None:
    """The client scoped to the user's linked location; None when there is none yet."""
    return None
