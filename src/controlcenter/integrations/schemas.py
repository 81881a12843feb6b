"""The connection test's answer."""

from __future__ import annotations

from pydantic import BaseModel, Field


class IntegrationTest(BaseModel):
    """Whether the call worked, and what it found or why it failed (never a secret)."""

    ok: bool
    detail: str = Field(description="what the call found, or the missing setting or refusal")
