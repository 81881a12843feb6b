"""The built-in CRM tool catalogue (filled by the CRM issue)."""

from __future__ import annotations

from controlcenter.tools.base import Tool


def crm_tools() -> list[Tool]:
    return []
