"""The long-lived objects of one app instance, built once in the lifespan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from controlcenter.admin_settings.store import SettingsStore
from controlcenter.chat.service import ChatParts
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


async def get_database(request: Request) -> Database:
    """The database alone, for the routes that need nothing else."""
    return (await get_services(request)).db


async def get_chat_parts(request: Request) -> ChatParts:
    """What the chat uses of the app, and nothing else."""
    services = await get_services(request)
    return ChatParts(
        db=services.db,
        settings=services.settings,
        crm=services.crm,
        providers=services.providers,
        tools=services.tools,
        runs=services.chat_runs,
    )


DatabaseDep = Annotated[Database, Depends(get_database)]
ChatPartsDep = Annotated[ChatParts, Depends(get_chat_parts)]
