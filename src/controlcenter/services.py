"""The long-lived objects of one app instance, built once in the lifespan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fastapi import Request

from controlcenter.admin_settings.store import SettingsStore
from controlcenter.chat.stream import ChatRuns
from controlcenter.config import Config
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database
from controlcenter.providers.base import Provider
from controlcenter.tools.router import ToolRouter


@dataclass
class Services:
    config: Config
    db: Database
    settings: SettingsStore
    crm: CrmTransport  # the shared pool every CRM client borrows
    providers: Mapping[str, Provider] = field(default_factory=dict)
    tools: ToolRouter = field(default_factory=ToolRouter)
    chat_runs: ChatRuns = field(default_factory=ChatRuns)


async def get_services(request: Request) -> Services:
    """The app's services. Async, so `Depends` resolves it on the event loop instead of a
    thread-pool hop per request."""
    services: Services = request.app.state.services
    return services
