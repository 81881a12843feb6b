"""The built-in CRM tool catalogue: the broker's own HighLevel sub-account, for the model.

Names follow HighLevel's own MCP server (`<app>_<operation>`), so a model that knows one
knows the other. Arguments never carry a location: the client is bound to the broker's
location (see crm/broker.py), and every schema forbids properties it does not list.

One module per HighLevel app, each tool declared next to its handler with the operationId it
calls (common.py). The catalogue's order is part of the interface: the tool router puts the
tools whose names start with a priority prefix first but keeps their order within that group
(docs/chat.md, "Tool router"), so the apps are listed here in the order the model sees them.
"""

from __future__ import annotations

from dataclasses import replace

from controlcenter.crm.tools import (
    calendars,
    contacts,
    conversations,
    emails,
    locations,
    opportunities,
    payments,
)
from controlcenter.crm.tools.access import is_read_only
from controlcenter.crm.tools.common import NOT_CONNECTED, OPERATION_IDS, tool_error
from controlcenter.crm.tools.titles import TITLES
from controlcenter.tools.base import Tool

__all__ = ["NOT_CONNECTED", "OPERATION_IDS", "crm_tools", "tool_error"]

_APPS = (contacts, conversations, opportunities, calendars, locations, emails, payments)


def crm_tools() -> list[Tool]:
    """About thirty tools over the broker's own sub-account, priority groups first, each
    marked read or write as `access.py` says and titled as `titles.py` says."""
    return [
        replace(tool, read_only=is_read_only(tool.name), title=TITLES[tool.name])
        for app in _APPS
        for tool in app.TOOLS
    ]
